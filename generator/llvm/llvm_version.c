/* llvm_version.c - lb_llvm_version (llvm_bridge.h) from LLVM's headers alone:
 * the executable knows it without loading LLVM. */
#include "llvm/Config/llvm-config.h"
#include "llvm_bridge.h"

const char *lb_llvm_version(void)
{
    return LLVM_VERSION_STRING;
}
