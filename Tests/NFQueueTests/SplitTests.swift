import Testing

@testable import NFQueue

/// A run of netlink messages built by hand: each a 16-byte `nlmsghdr` whose
/// `nlmsg_len` is the given length, a body of the message's index, and
/// padding to 4 bytes, as netlink lays them out.
private func messages(_ lengths: [Int]) -> (bytes: [UInt8], starts: [Int]) {
    var bytes: [UInt8] = []
    var starts: [Int] = []
    for (index, length) in lengths.enumerated() {
        starts.append(bytes.count)
        withUnsafeBytes(of: UInt32(length)) { bytes += $0 }  // nlmsg_len, host order
        bytes += [0x03, 0x01, 0, 0]  // nlmsg_type, nlmsg_flags
        withUnsafeBytes(of: UInt32(index)) { bytes += $0 }  // nlmsg_seq
        bytes += [0, 0, 0, 0]  // nlmsg_pid
        bytes += [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: length - 16)
        bytes += [UInt8](repeating: 0, count: (4 - length % 4) % 4)
    }
    return (bytes, starts)
}

/// Lengths with unaligned ones, a lone header and one message far larger than the rest.
private let lengths = [20, 37, 16, 64, 101, 24, 300, 18, 52]

@Test(arguments: [0, 16, 40, 64, 100, 128, 200, 1000, 10_000])
func splitCutsAtMessageBoundariesWithinTheLimit(limit: Int) throws {
    let (bytes, starts) = messages(lengths)
    let ends = Array(starts.dropFirst()) + [bytes.count]
    try bytes.withUnsafeBytes { run in
        let pieces = NetfilterQueue.split(run, limit: limit)
        var offset = 0
        var joined: [UInt8] = []
        for (number, piece) in pieces.enumerated() {
            let start = try #require(piece.baseAddress) - run.baseAddress!
            #expect(start == offset, "piece \(number) is not contiguous")
            #expect(starts.contains(start), "piece \(number) starts inside a message")
            let end = start + piece.count
            #expect(ends.contains(end), "piece \(number) ends inside a message")
            let inside = starts.filter { $0 >= start && $0 < end }.count
            if limit == 0 {
                #expect(inside == 1, "limit 0: piece \(number) holds \(inside) messages")
            } else if inside > 1 {
                #expect(piece.count <= limit, "piece \(number) is \(piece.count) bytes")
            }
            // Greedy: the next message would not have fitted.
            if limit > 0, number < pieces.count - 1, let next = ends.first(where: { $0 > end }) {
                #expect(next - start > limit, "piece \(number) stopped early")
            }
            joined += piece
            offset = end
        }
        #expect(joined == bytes)
        if limit == 0 { #expect(pieces.count == lengths.count) }
    }
}

@Test func splitKeepsAnOversizeMessageWhole() throws {
    let (bytes, starts) = messages([24, 300, 24])
    try bytes.withUnsafeBytes { run in
        let pieces = NetfilterQueue.split(run, limit: 100)
        #expect(pieces.map(\.count) == [24, 300, 24])
        let middle = try #require(pieces.dropFirst().first)
        #expect(middle.baseAddress! - run.baseAddress! == starts[1])
    }
}

@Test func splitOfOneMessageIsThatMessage() {
    let (bytes, _) = messages([101])
    bytes.withUnsafeBytes { run in
        for limit in [0, 16, 104, 4096] {
            #expect(NetfilterQueue.split(run, limit: limit).map(\.count) == [104], "limit \(limit)")
        }
    }
}
