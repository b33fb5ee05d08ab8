import BPFClassifier
import SystemPackage
import Testing

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
