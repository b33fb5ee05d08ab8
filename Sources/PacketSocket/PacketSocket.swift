import CPacketSocket
import Syscall
import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An `AF_PACKET`/`SOCK_DGRAM` socket bound to one interface: it reads the
/// network-layer packets (link header removed, whatever the link type) that
/// cross the interface in both directions and pass its classic BPF filter.
/// Non-blocking; closed when released.
public final class PacketSocket: Sendable {
    /// The socket's file descriptor, for `poll`.
    public let fileDescriptor: Int32
    /// The interface index it is bound to.
    public let interfaceIndex: Int32

    /// Opens a socket reading the packets of interface `interfaceIndex` that
    /// `filter` accepts: `socket(AF_PACKET, SOCK_DGRAM|SOCK_NONBLOCK|SOCK_CLOEXEC, 0)`
    /// (protocol 0 receives nothing yet), `setsockopt(SO_ATTACH_FILTER)`, then
    /// `bind` to `ETH_P_ALL` on the interface, so no packet is read unfiltered.
    /// Throws the errno of the failing call (`ENODEV` for an interface that is
    /// gone, `EPERM` without `CAP_NET_RAW`).
    public init(interfaceIndex: Int32, filter: SocketFilter) throws(PacketSocketError) {
        let s: Int32
        do throws(Errno) {
            s = try retryingOnInterrupt {
                socket(
                    AF_PACKET,
                    Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
                    0)
            }
        } catch { throw PacketSocketError(operation: .open, errno: error) }
        var program = filter.instructions
        let attached = program.withUnsafeMutableBufferPointer { p in
            var fprog = sock_fprog(len: UInt16(p.count), filter: p.baseAddress)
            return setsockopt(
                s, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, socklen_t(MemoryLayout<sock_fprog>.size))
        }
        guard attached == 0 else {
            let e = Errno(rawValue: errno)
            close(s)
            throw PacketSocketError(operation: .attachFilter, errno: e)
        }
        var addr = sockaddr_ll()
        addr.sll_family = UInt16(AF_PACKET)
        addr.sll_protocol = UInt16(ETH_P_ALL).bigEndian
        addr.sll_ifindex = interfaceIndex
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(s, $0, socklen_t(MemoryLayout<sockaddr_ll>.size))
            }
        }
        guard bound == 0 else {
            let e = Errno(rawValue: errno)
            close(s)
            throw PacketSocketError(operation: .bind, errno: e)
        }
        fileDescriptor = s
        self.interfaceIndex = interfaceIndex
    }

    deinit { close(fileDescriptor) }

    /// Whether this process may open packet sockets at all: opens
    /// `socket(AF_PACKET, SOCK_DGRAM|SOCK_CLOEXEC, 0)` (protocol 0 and no
    /// bind: it reads nothing) and closes it. Throws the `.open` error a
    /// ``init(interfaceIndex:filter:)`` would throw for every interface
    /// (`EPERM` without `CAP_NET_RAW`, `EAFNOSUPPORT` where a seccomp filter
    /// such as systemd's `RestrictAddressFamilies=` refuses `AF_PACKET`), so
    /// a daemon can refuse to start rather than retry what cannot succeed.
    public static func checkAvailable() throws(PacketSocketError) {
        do throws(Errno) {
            let s = try retryingOnInterrupt {
                socket(AF_PACKET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            }
            close(s)
        } catch { throw PacketSocketError(operation: .open, errno: error) }
    }

    /// Reads one packet into `buffer` (`recvfrom` with `MSG_TRUNC`); nil
    /// when none is waiting (`EAGAIN`). Throws `ENETDOWN` and the like when the
    /// interface went down or away.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(PacketSocketError)
        -> ReceivedPacket?
    {
        var from = sockaddr_ll()
        var fromLength = socklen_t(MemoryLayout<sockaddr_ll>.size)
        let n: Int
        do throws(Errno) {
            n = try retryingOnInterrupt {
                withUnsafeMutablePointer(to: &from) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(
                            fileDescriptor, buffer.baseAddress, buffer.count, Int32(MSG_TRUNC), $0,
                            &fromLength)
                    }
                }
            }
        } catch {
            if error == .wouldBlock { return nil }
            throw PacketSocketError(operation: .receive, errno: error)
        }
        return ReceivedPacket(
            length: min(n, buffer.count), wireLength: n, packetType: from.sll_pkttype,
            hardwareType: from.sll_hatype, protocol: UInt16(bigEndian: from.sll_protocol))
    }

    /// The index of interface `name` (`if_nametoindex`), or nil when there is none.
    public static func interfaceIndex(_ name: String) -> Int32? {
        let i = if_nametoindex(name)
        return i == 0 ? nil : Int32(bitPattern: i)
    }
}

/// One packet read by ``PacketSocket/receive(into:)``.
public struct ReceivedPacket: Sendable, Equatable {
    /// Bytes stored in the buffer.
    public var length: Int
    /// The packet's length; more than `length` when the buffer cut it.
    public var wireLength: Int
    /// `sll_pkttype`: `PACKET_HOST` (0), `PACKET_BROADCAST` (1),
    /// `PACKET_MULTICAST` (2), `PACKET_OTHERHOST` (3), `PACKET_OUTGOING` (4).
    public var packetType: UInt8
    /// `sll_hatype`, the link type (`ARPHRD_ETHER` 1, `ARPHRD_LOOPBACK` 772...).
    public var hardwareType: UInt16
    /// `sll_protocol`, the EtherType (0x0800 IPv4, 0x86DD IPv6), host order.
    public var `protocol`: UInt16

    /// Whether the packet was cut to the buffer.
    public var isTruncated: Bool { wireLength > length }
    /// Whether the host sent it (`PACKET_OUTGOING`) rather than received it.
    public var isOutgoing: Bool { packetType == UInt8(PACKET_OUTGOING) }
    /// Whether it was read on a loopback interface (`ARPHRD_LOOPBACK`), where
    /// each packet is seen twice, outgoing then incoming.
    public var isLoopback: Bool { hardwareType == 772 }
}

/// What failed in a ``PacketSocket`` call.
public struct PacketSocketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The system call that failed.
    public enum Operation: String, Sendable {
        /// `socket(AF_PACKET, ...)`.
        case open = "socket(AF_PACKET)"
        /// `setsockopt(SO_ATTACH_FILTER)`.
        case attachFilter = "setsockopt(SO_ATTACH_FILTER)"
        /// `bind` to the interface.
        case bind = "bind(AF_PACKET)"
        /// `recvfrom`.
        case receive = "recvfrom"
    }

    /// The system call that failed.
    public var operation: Operation
    /// Its errno.
    public var errno: Errno

    /// An error.
    public init(operation: Operation, errno: Errno) {
        self.operation = operation
        self.errno = errno
    }

    /// `call: strerror`, one line.
    public var description: String { "\(operation.rawValue): \(errno)" }
}

/// A classic BPF program for `SO_ATTACH_FILTER` (`struct sock_filter`).
public struct SocketFilter: Sendable {
    /// The instructions.
    public var instructions: [sock_filter]

    /// A program from its instructions.
    public init(_ instructions: [sock_filter]) { self.instructions = instructions }

    /// How many bytes of a packet an accepting program passes (all of any packet).
    public static let acceptLength: UInt32 = 0x40000

    /// Accepts IPv4 and IPv6 UDP and TCP packets with source or destination
    /// port 53, as `SOCK_DGRAM` delivers them (the filter sees the packet from
    /// the network header; the EtherType comes from `skb->protocol`,
    /// `SKF_AD_PROTOCOL`). IPv4 fragments are refused (the snooper ignores
    /// them). IPv6: the ports after no or one hop-by-hop, routing or
    /// destination options header are checked; packets with AH or a second
    /// such header are passed for the snooper to walk.
    public static let dnsPort53: SocketFilter = {
        var a = Assembler()
        let ld = UInt16(BPF_LD), ldx = UInt16(BPF_LDX), jmp = UInt16(BPF_JMP), ret = UInt16(BPF_RET)
        let h = UInt16(BPF_H), b = UInt16(BPF_B), abs = UInt16(BPF_ABS), ind = UInt16(BPF_IND)
        let msh = UInt16(BPF_MSH), jeq = UInt16(BPF_JEQ), jset = UInt16(BPF_JSET), k = UInt16(BPF_K)
        let alu = UInt16(BPF_ALU), add = UInt16(BPF_ADD), lsh = UInt16(BPF_LSH)
        let misc = UInt16(BPF_MISC), tax = UInt16(BPF_TAX)
        a.op(ld | h | abs, UInt32(bitPattern: SKF_AD_OFF + SKF_AD_PROTOCOL))
        a.jump(jmp | jeq | k, 0x0800, true: "v4", false: nil)
        a.jump(jmp | jeq | k, 0x86DD, true: "v6", false: "reject")
        a.label("v4")
        a.op(ld | b | abs, 9)
        a.jump(jmp | jeq | k, 17, true: "v4ports", false: nil)
        a.jump(jmp | jeq | k, 6, true: "v4ports", false: "reject")
        a.label("v4ports")
        a.op(ld | h | abs, 6)
        a.jump(jmp | jset | k, 0x3FFF, true: "reject", false: nil)  // MF or a fragment offset
        a.op(ldx | b | msh, 0)  // X = 4 * (IHL)
        a.op(ld | h | ind, 0)
        a.jump(jmp | jeq | k, 53, true: "accept", false: nil)
        a.op(ld | h | ind, 2)
        a.jump(jmp | jeq | k, 53, true: "accept", false: "reject")
        a.label("v6")
        a.op(ld | b | abs, 6)
        a.jump(jmp | jeq | k, 17, true: "v6ports", false: nil)
        a.jump(jmp | jeq | k, 6, true: "v6ports", false: nil)
        for next: UInt32 in [0, 43, 60] { a.jump(jmp | jeq | k, next, true: "v6ext", false: nil) }
        a.jump(jmp | jeq | k, 51, true: "accept", false: "reject")  // AH: the snooper walks it
        a.label("v6ports")
        a.op(ld | h | abs, 40)
        a.jump(jmp | jeq | k, 53, true: "accept", false: nil)
        a.op(ld | h | abs, 42)
        a.jump(jmp | jeq | k, 53, true: "accept", false: "reject")
        // One hop-by-hop, routing or destination options header (8 * (length + 1)
        // bytes): the ports after it, so that MLD reports (hop-by-hop, then
        // ICMPv6) stay out; a second extension header goes to the snooper.
        a.label("v6ext")
        a.op(ld | b | abs, 41)
        a.op(alu | add | k, 1)
        a.op(alu | lsh | k, 3)
        a.op(alu | add | k, 40)
        a.op(misc | tax, 0)
        a.op(ld | b | abs, 40)
        a.jump(jmp | jeq | k, 17, true: "v6xports", false: nil)
        a.jump(jmp | jeq | k, 6, true: "v6xports", false: nil)
        for next: UInt32 in [0, 43, 60] { a.jump(jmp | jeq | k, next, true: "accept", false: nil) }
        a.jump(jmp | jeq | k, 51, true: "accept", false: "reject")
        a.label("v6xports")
        a.op(ld | h | ind, 0)
        a.jump(jmp | jeq | k, 53, true: "accept", false: nil)
        a.op(ld | h | ind, 2)
        a.jump(jmp | jeq | k, 53, true: "accept", false: "reject")
        a.label("accept")
        a.op(ret | k, acceptLength)
        a.label("reject")
        a.op(ret | k, 0)
        return SocketFilter(a.program())
    }()
}

/// Resolves the forward jumps of a classic BPF program by label.
struct Assembler {
    private var code: [sock_filter] = []
    private var labels: [String: Int] = [:]
    private var fixups: [(at: Int, trueLabel: String?, falseLabel: String?)] = []

    mutating func op(_ code: UInt16, _ k: UInt32) {
        self.code.append(sock_filter(code: code, jt: 0, jf: 0, k: k))
    }

    /// A conditional jump; a nil label falls through to the next instruction.
    mutating func jump(_ code: UInt16, _ k: UInt32, true t: String?, false f: String?) {
        fixups.append((self.code.count, t, f))
        op(code, k)
    }

    mutating func label(_ name: String) { labels[name] = code.count }

    /// The instructions with jump offsets filled in (labels must follow their jumps).
    func program() -> [sock_filter] {
        var out = code
        for fix in fixups {
            func offset(_ label: String?) -> UInt8 {
                guard let label else { return 0 }
                return UInt8(labels[label]! - fix.at - 1)
            }
            out[fix.at].jt = offset(fix.trueLabel)
            out[fix.at].jf = offset(fix.falseLabel)
        }
        return out
    }
}
