#ifndef CPACKETSOCKET_SHIM_H
#define CPACKETSOCKET_SHIM_H
// AF_PACKET sockets and classic BPF socket filters: the structs and constants
// Swift's Glibc module does not import (struct sockaddr_ll, PACKET_*,
// struct sock_filter/sock_fprog, SKF_AD_*, BPF_* opcodes). Only headers: the
// integer macros import as constants; the filter is assembled in Swift.
#include <netpacket/packet.h>
#include <net/ethernet.h>
#include <linux/filter.h>
#include <sys/socket.h>
#endif
