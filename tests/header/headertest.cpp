#include "headertest_body.h"

int main() { return header_test_main(); }
