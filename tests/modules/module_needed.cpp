// The library tests/modules' "dep" module needs: absent from every search path at run time.
extern "C" __attribute__((visibility("default"))) int msa_test_module_needed() { return 1; }
