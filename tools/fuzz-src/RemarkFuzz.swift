// libFuzzer entry point over PacketMarker.remark/classify and TransportChecksum.complete.
// Compiled by tools/fuzz together with the QoSMapCore and QoSMapPacket sources
// (not a SwiftPM target: -sanitize=fuzzer would break `swift build`).

import QoSMapCore
import QoSMapPacket

/// A domain with every inbound and outbound cell set, built without the table
/// loader (which needs libyaml): DSCP to classes by its upper bits, colors by its
/// low bits, so lookups vary with the input.
let fuzzDomain: DSDomain = {
    var b = DomainBuilder(name: "fuzz")
    b.dropEligibility = .color
    for f in Field.allCases {
        for v in 0..<f.valueCount {
            let sc = ServiceClass(rawValue: UInt8(v % 8))!
            b.setInbound(f, UInt8(v), Treatment(sc, Color(rawValue: UInt8(v / 8 % 3))!))
        }
        for t in Treatment.allCells { b.setOutbound(f, t, UInt8(t.cellIndex * 5 % (f.valueCount))) }
    }
    return try! b.build()
}()

/// libFuzzer calls this with each input; a trap (precondition) is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    // First byte picks format, trust and fields; the rest is the packet.
    let selector = data[0]
    let count = size - 1
    // An exact-size heap copy: ASan-style overflow detection by libFuzzer's
    // malloc hooks needs the packet to end where the buffer ends.
    let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 1)
    defer { buf.deallocate() }
    let packet = UnsafeMutableRawBufferPointer(rebasing: buf[0..<count])
    if count > 0 { packet.baseAddress!.copyMemory(from: data + 1, byteCount: count) }
    let original = Array(packet)
    let policy = MarkingPolicy(
        trust: TrustMode.allCases[Int(selector) % TrustMode.allCases.count], ingress: fuzzDomain,
        rewrite: RewriteFields(rawValue: (selector >> 3) & 7))
    let format: PacketFormat = selector & 0x80 != 0 ? .ethernet : .ip
    // classify runs remark's parser and decisions without writing: same result, no byte moved.
    let c = PacketMarker.classify(UnsafeRawBufferPointer(packet), format: format, policy: policy)
    precondition(Array(packet) == original, "classify changed the buffer")
    let r = PacketMarker.remark(packet, format: format, policy: policy)
    precondition(c == r, "classify \(c) disagrees with remark \(r)")
    precondition(!(r.tailMalformed && r.status == .malformed), "malformed is for the fixed header only")
    switch r.status {
    case .malformed, .unsupported, .unchanged:
        // These promise an untouched buffer.
        precondition(Array(packet) == original, "buffer changed with status \(r.status)")
    case .rewritten:
        precondition(Array(packet) != original, "rewritten but no byte changed")
        precondition(packet.count == original.count)
    }
    if let l3 = r.l3Offset, r.ipVersion == 4 {
        precondition(packet[l3 + 1] & 3 == original[l3 + 1] & 3, "ECN changed")
        // The IPv4 header checksum verifies after a rewrite iff it did before
        // (checked when the whole header is in the buffer; a malformed tail may cut it).
        let ihl = Int(original[l3] & 0x0F) * 4
        func sum(_ b: [UInt8]) -> UInt32 {
            var s: UInt32 = 0
            var i = l3
            while i < l3 + ihl { s += UInt32(b[i]) << 8 | UInt32(b[i + 1]); i += 2 }
            while s >> 16 != 0 { s = (s & 0xFFFF) + (s >> 16) }
            return s
        }
        if l3 + ihl <= original.count {
            precondition((sum(original) == 0xFFFF) == (sum(Array(packet)) == 0xFFFF), "IPv4 checksum broken")
        }
    }
    if format == .ip {
        let before = Array(packet)
        if !TransportChecksum.complete(packet) {
            precondition(Array(packet) == before, "complete() returned false but changed the packet")
        } else {
            // A packet the marker finds malformed, tail included, has no L4 to complete.
            precondition(r.status != .malformed && !r.tailMalformed, "complete() accepted a malformed packet")
            // Idempotent: completing a completed packet changes nothing.
            let once = Array(packet)
            precondition(
                TransportChecksum.complete(packet) && Array(packet) == once, "complete() not idempotent")
        }
    }
    return 0
}
