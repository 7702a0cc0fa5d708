/* jit_stencils.h for win_unwind_msvc.exe: the MinGW-built VM runs the stencils
 * of MSVC's triple (the dispatcher stencilgen writes picks MinGW's under
 * MinGW; both triples share the ABI, COFF and unwind codes). */
#include "jit_stencils-x86_64-pc-windows-msvc.h"
