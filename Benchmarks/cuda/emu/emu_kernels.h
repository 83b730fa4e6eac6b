// The emulator's kernel table: each module's kernels (pkc_kernels.cu compiled as host C++ with
// one PKC_FORMAT, emu_module.cpp) register here by name, with a typed trampoline that unpacks
// cuLaunchKernel's argument array and the argument sizes a graph capture copies.
#pragma once
#include <cstddef>
#include <type_traits>
#include <utility>

namespace pkc_emu {

struct Kernel {
    const char *name;
    void *fn;
    void (*invoke)(void *fn, void **args);
    int arg_count;
    const size_t *arg_sizes;
};

struct Module {
    int format; // PKC_FORMAT: -1 for the core module
    const Kernel *kernels;
    int count;
};

void register_module(const Module *m);

template <class... A> struct Signature {
    static constexpr size_t sizes[sizeof...(A) + 1] = {sizeof(A)..., 0};
    template <size_t... I> static void call(void *fn, void **args, std::index_sequence<I...>) {
        reinterpret_cast<void (*)(A...)>(fn)(*static_cast<std::remove_cv_t<A> *>(args[I])...);
    }
    static void invoke(void *fn, void **args) { call(fn, args, std::index_sequence_for<A...>{}); }
};

template <class... A> Kernel kernel(const char *name, void (*fn)(A...)) {
    using S = Signature<A...>;
    return Kernel{name, reinterpret_cast<void *>(fn), &S::invoke, (int)sizeof...(A), S::sizes};
}

} // namespace pkc_emu
