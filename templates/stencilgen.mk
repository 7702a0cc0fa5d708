# stencilgen.mk - generate a VM's stencil headers from GNU make (docs/build.md, "GNU make").
#
# Set these, then `include` this file (installed as share/stencilgen/stencilgen.mk):
#   STENCILGEN_MANIFEST   the manifest (required)
#   STENCILGEN_OUTDIR     where the headers go (default: jit)
#   STENCILGEN_TRIPLES    the targets to build (default: every target of the manifest;
#                         then list them anyway, or only jit_stencils.h is a known output)
#   STENCILGEN            the generator (default: stencilgen, from PATH)
#   STENCILGEN_FLAGS      more options (-j, --cache-dir, --launcher, ...)
# and make what includes the header depend on $(STENCILGEN_HEADERS):
#   main.o: main.c $(STENCILGEN_HEADERS)
#
# The generator writes a depfile naming the manifest, template, shim, op sources
# and every header they include; `-include` reads it from the second run on, so
# make re-runs the generator exactly when one of them changes (the first run
# has no headers yet and builds them anyway).

# Its rule must not become the Makefile's default goal: kept as it was.
stencilgen_default_goal := $(.DEFAULT_GOAL)

STENCILGEN ?= stencilgen
STENCILGEN_OUTDIR ?= jit
ifndef STENCILGEN_MANIFEST
$(error stencilgen.mk: set STENCILGEN_MANIFEST to the manifest before including it)
endif

STENCILGEN_HEADERS := $(STENCILGEN_OUTDIR)/jit_stencils.h \
    $(patsubst %,$(STENCILGEN_OUTDIR)/jit_stencils-%.h,$(STENCILGEN_TRIPLES))

# One run writes every header: a grouped target (GNU make 4.3+), so make runs
# the generator once for all of them.
$(STENCILGEN_HEADERS) &: $(STENCILGEN_MANIFEST)
	$(STENCILGEN) build --manifest $(STENCILGEN_MANIFEST) --outdir $(STENCILGEN_OUTDIR) \
	    --depfile $(STENCILGEN_OUTDIR)/jit_stencils.d \
	    $(addprefix --target ,$(STENCILGEN_TRIPLES)) $(STENCILGEN_FLAGS)

-include $(STENCILGEN_OUTDIR)/jit_stencils.d

.DEFAULT_GOAL := $(stencilgen_default_goal)
