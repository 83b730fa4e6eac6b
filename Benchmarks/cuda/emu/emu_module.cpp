// One kernel module of pkc_kernels.cu (PKC_FORMAT set by build.sh) as host C++, in a namespace of
// its own so that modules' helpers never merge, and its kernels' registration. build.sh compiles
// this twice: first without PKC_EMU_KERNELS to list the module's kernels (nm), then with the
// list (a file of K(name) lines) included.
#include "emu_device.h"
#include "emu_kernels.h"

#define PKC_EMULATOR 1
namespace PKC_EMU_NS {
#include "pkc_kernels.cu"
}

#ifdef PKC_EMU_KERNELS
namespace {
const pkc_emu::Kernel kernels[] = {
#define K(name) pkc_emu::kernel(#name, PKC_EMU_NS::name),
#include PKC_EMU_KERNELS
#undef K
};
const pkc_emu::Module module = {PKC_FORMAT, kernels, (int)(sizeof kernels / sizeof kernels[0])};
struct Registration {
    Registration() { pkc_emu::register_module(&module); }
} registration;
} // namespace
#endif
