#include <libmnl/libmnl.h>
