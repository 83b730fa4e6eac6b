// Read bandwidth of this machine with 1 and 2 threads: the bound that decode (which streams every
// weight once per token) cannot beat. Developer tool, not part of the package. With `huge`, the
// buffer asks for 2 MiB pages (as the packed weights' mapping does).
//   cc -O2 -mavx512f -o /tmp/read_bandwidth Benchmarks/read_bandwidth.c -lpthread && /tmp/read_bandwidth [huge]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <immintrin.h>
#include <time.h>
#include <sys/mman.h>
#define SZ (256L<<20)
static char *buf; static int nth;
#include "timing.h"
static void *rd(void *a){ long i=(long)a; long lo=SZ/nth*i, hi=SZ/nth*(i+1); __m512i s=_mm512_setzero_si512();
 for(int r=0;r<5;r++) for(long o=lo;o<hi;o+=256){ s=_mm512_add_epi32(s,_mm512_load_si512(buf+o)); s=_mm512_add_epi32(s,_mm512_load_si512(buf+o+64)); s=_mm512_add_epi32(s,_mm512_load_si512(buf+o+128)); s=_mm512_add_epi32(s,_mm512_load_si512(buf+o+192));}
 return (void*)(long)_mm512_reduce_add_epi32(s);}
int main(int c,char**v){ buf=aligned_alloc(2L<<20,SZ); if(c>1&&!strcmp(v[1],"huge")) madvise(buf,SZ,MADV_HUGEPAGE); memset(buf,1,SZ); for(nth=1;nth<=2;nth++){ pthread_t t[2]; double t0=now(); for(long i=0;i<nth;i++) pthread_create(&t[i],0,rd,(void*)i); for(int i=0;i<nth;i++) pthread_join(t[i],0); double dt=now()-t0; printf("%d threads: %.1f GB/s\n",nth,5.0*SZ/dt/1e9);} }
