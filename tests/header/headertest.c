#include "headertest_body.h"

int main(void) { return header_test_main(); }
