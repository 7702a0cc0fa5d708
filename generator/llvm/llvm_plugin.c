/* llvm_plugin.c - the table the module exports (llvm_plugin.h). The module
 * is built with hidden visibility, so these bind to its own functions, not
 * to the executable's forwarders of the same names (llvm_loader.c). */
#include "llvm_plugin.h"

#include "llvm/Config/llvm-config.h"

__attribute__((visibility("default"))) const gen_llvm_api *sg_llvm_api_get(void);

const gen_llvm_api *sg_llvm_api_get(void)
{
    static const gen_llvm_api api = {
        SG_LLVM_API_VERSION, LLVM_VERSION_STRING, lb_read_object, lb_disasm_create,
        lb_disasm_one,       lb_disasm_destroy,   discover_ops,
    };
    return &api;
}
