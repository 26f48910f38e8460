// One part of the public header alone (HT_HEADER, set by meson), compiled
// as C++17 with warnings as errors: it must bring everything it uses.
#include HT_HEADER

int main() { return 0; }
