import CBPF

/// What one `BPF_PROG_TEST_RUN` of a tc program gave.
public struct BPFTestRun: Sendable, Equatable {
    /// The program's return value (`TC_ACT_OK` is 0).
    public var returnValue: UInt32
    /// The packet as the program left it.
    public var packet: [UInt8]
    /// `skb->mark` after the run.
    public var mark: UInt32
    /// `skb->priority` after the run.
    public var priority: UInt32
    /// The kernel's average time per run, in nanoseconds.
    public var averageNanoseconds: UInt32
}

extension BPFProgram {
    /// Runs a tc (`__sk_buff`) program in the kernel on a copy of `packet`
    /// (`bpf_prog_test_run_opts`, as `bpftool prog run` does), with
    /// `skb->ifindex` and `skb->ingress_ifindex` set; nothing is attached.
    ///
    /// - Parameters:
    ///   - packet: an Ethernet frame.
    ///   - ifindex: the egress interface; must exist in the caller's network
    ///     namespace (1, loopback, always does).
    ///   - ingressIfindex: the interface the packet arrived on (0: host-originated).
    ///   - mark: `skb->mark` before the run.
    ///   - repeat: how many times the kernel runs it (timing only; the packet
    ///     is run on again as the previous run left it).
    public func testRun(
        packet: [UInt8], ifindex: UInt32 = 1, ingressIfindex: UInt32 = 0, mark: UInt32 = 0,
        repeat count: UInt32 = 1
    ) throws(BPFError) -> BPFTestRun {
        var context = __sk_buff()
        context.ifindex = ifindex
        context.ingress_ifindex = ingressIfindex
        context.mark = mark
        var contextOut = __sk_buff()
        // Room for what a program may add (it may not grow a test-run packet much).
        var output = [UInt8](repeating: 0, count: packet.count + 256)
        var input = packet
        var options = bpf_test_run_opts()
        options.sz = MemoryLayout<bpf_test_run_opts>.size
        options.repeat = Int32(clamping: count)
        let fd = self.fd
        _ = try libbpf(.testRun, name) {
            input.withUnsafeMutableBytes { inp in
                output.withUnsafeMutableBytes { out in
                    withUnsafeMutablePointer(to: &context) { ctxIn in
                        withUnsafeMutablePointer(to: &contextOut) { ctxOut in
                            options.data_in = UnsafeRawPointer(inp.baseAddress)
                            options.data_size_in = UInt32(inp.count)
                            options.data_out = out.baseAddress
                            options.data_size_out = UInt32(out.count)
                            options.ctx_in = UnsafeRawPointer(ctxIn)
                            options.ctx_size_in = UInt32(MemoryLayout<__sk_buff>.size)
                            options.ctx_out = UnsafeMutableRawPointer(ctxOut)
                            options.ctx_size_out = UInt32(MemoryLayout<__sk_buff>.size)
                            return bpf_prog_test_run_opts(fd, &options)
                        }
                    }
                }
            }
        }
        let outputSize = Int(options.data_size_out)
        return BPFTestRun(
            returnValue: options.retval, packet: Array(output.prefix(outputSize)), mark: contextOut.mark,
            priority: contextOut.priority, averageNanoseconds: options.duration)
    }
}
