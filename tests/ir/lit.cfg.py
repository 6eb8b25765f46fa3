# lit configuration for kiln's IR tests: kiln-opt and FileCheck from the build and LLVM 22.
import os
import lit.formats

config.name = "kiln-ir"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
site = lit_config.params.get("kiln_site_config")
if not site:
    lit_config.fatal("run through ctest, or pass --param kiln_site_config=<build>/tests/ir/lit.site.cfg.py")
exec(open(site).read())
# ctest runs one lit per test file, in parallel: each gets its own exec root, since lit rewrites
# the suite's .lit_test_times.txt there after every run (two at once left it unreadable, and
# every later run failed).
config.test_exec_root = lit_config.params.get("kiln_exec_root", kiln_exec_root)
config.environment["PATH"] = os.pathsep.join([kiln_bin, llvm_bin, os.environ.get("PATH", "")])
