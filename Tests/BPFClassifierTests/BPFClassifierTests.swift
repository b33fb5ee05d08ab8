import Foundation
import SystemPackage
import Testing

@testable import BPFClassifier

@Test func garbageIsNotAnObject() {
    #expect {
        _ = try BPFObject(bytes: [UInt8](repeating: 0x41, count: 64), name: "garbage")
    } throws: { error in
        guard let e = error as? BPFError else { return false }
        return e.operation == .open && e.description.hasPrefix("bpf_object__open_mem garbage: ")
    }
}

@Test func detachingFromNoInterfaceFails() {
    // ifindex 0x7fff_fff0 does not exist: the netlink request is refused.
    let filter = TrafficControl.Filter(ifindex: 0x7fff_fff0, direction: .egress, handle: 1, priority: 1)
    #expect(throws: BPFError.self) { try TrafficControl.detach(filter) }
}

@Test func possibleCPUsIsPositive() {
    #expect(BPFMap.possibleCPUs >= 1)
}

/// A refused program's reason is the last line of the verifier's log before
/// its statistics, with the program's name (as libbpf prints the log).
@Test func verifierReasonIsTheLogsLastLine() {
    let log = """
        libbpf: prog 'qosmap_egress': BPF program load failed: Invalid argument
        libbpf: prog 'qosmap_egress': -- BEGIN PROG LOAD LOG --
        func#0 @0
        4273: for (int n = 0; n <= QM_MAX_EXT; n++) {
        back-edge from insn 4273 to 4274
        verification time 35236 usec
        stack depth 0+0+0+0+0
        processed 0 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0
        -- END PROG LOAD LOG --
        libbpf: prog 'qosmap_egress': failed to load: -22

        """
    #expect(LibbpfLog.verifierReason(log) == "qosmap_egress: back-edge from insn 4273 to 4274")
    #expect(LibbpfLog.verifierReason("libbpf: map 'x': failed to create\n") == nil)
}

/// A program the verifier refuses throws `.load` with the reason, and
/// libbpf's dump of the log is kept from stderr. Needs CAP_BPF (root).
@Test(.enabled(if: getuid() == 0)) func refusedProgramGivesTheVerifiersReason() throws {
    let object = try #require(refusedObject)
    #expect {
        _ = try BPFObject(bytes: object, name: "refused")
    } throws: { error in
        guard let e = error as? BPFError, e.operation == .load, let reason = e.verifier else { return false }
        return reason.hasPrefix("refused_prog: invalid read from stack")
            && e.description.contains("; verifier: refused_prog: ")
    }
}

/// A tc program every kernel refuses, whatever the capabilities: it reads
/// the stack 1,024 bytes down (the stack is 512). Built from
///     SEC("tc") int refused_prog(struct __sk_buff *skb) {
///         long x;
///         asm volatile("%0 = *(u64 *)(r10 - 1024)" : "=r"(x));
///         return (int)x;
///     }
///     char LICENSE[] SEC("license") = "GPL";
/// with `clang -O2 -target bpf -c` and `llvm-strip -g`.
private let refusedObject = Data(
    base64Encoded: """
        f0VMRgIBAQAAAAAAAAAAAAEA9wABAAAAAAAAAAAAAAAAAAAAAAAAAOgAAAAAAAAAAAAAAEAAAAAAAEAABwABAHmgAPwAAAAAlQAA
        AAAAAABHUEwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAcAAAASAAMAAAAAAAAAAAAQAAAAAAAAAD0AAAARAAQAAAAAAAAA
        AAAEAAAAAAAAAAIDAC50ZXh0AHJlZnVzZWRfcHJvZwAubGx2bV9hZGRyc2lnAGxpY2Vuc2UAdGMALnN0cnRhYgAuc3ltdGFiAExJ
        Q0VOU0UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAtAAAA
        AwAAAAAAAAAAAAAAAAAAAAAAAACiAAAAAAAAAEUAAAAAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAQAAAAEAAAAGAAAAAAAA
        AAAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAACoAAAABAAAABgAAAAAAAAAAAAAAAAAAAEAA
        AAAAAAAAEAAAAAAAAAAAAAAAAAAAAAgAAAAAAAAAAAAAAAAAAAAiAAAAAQAAAAMAAAAAAAAAAAAAAAAAAABQAAAAAAAAAAQAAAAA
        AAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAFAAAAANM/28AAACAAAAAAAAAAAAAAAAAoAAAAAAAAAACAAAAAAAAAAAAAAAAAAAA
        AQAAAAAAAAAAAAAAAAAAADUAAAACAAAAAAAAAAAAAAAAAAAAAAAAAFgAAAAAAAAASAAAAAAAAAABAAAAAQAAAAgAAAAAAAAAGAAA
        AAAAAAA=
        """, options: .ignoreUnknownCharacters
).map { [UInt8]($0) }
