#include "CQoSMapShim.h"
#include <unistd.h>
#include <libmnl/libmnl.h>

size_t cqosmap_mnl_socket_buffer_size(void) { return (size_t)MNL_SOCKET_BUFFER_SIZE; }
