/* clang_plugin.c - the table the clang module exports (llvm_plugin.h). */
#include "llvm_plugin.h"

#include "llvm/Config/llvm-config.h"

__attribute__((visibility("default"))) const gen_clang_api *sg_clang_api_get(void);

const gen_clang_api *sg_clang_api_get(void)
{
    static const gen_clang_api api = {
        SG_CLANG_API_VERSION, LLVM_VERSION_STRING, lb_clang_path, lb_clang_main,
    };
    return &api;
}
