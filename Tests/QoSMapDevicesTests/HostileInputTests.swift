import Foundation
import QoSMapCore
import QoSMapDevices
import Testing

/// Device files come from routers and people: broken ones must give an
/// error or a result, never a trap. Each case cuts, duplicates or garbles a
/// golden export at random places (seeded, so a failure reproduces) and
/// parses it.
@Suite("Device importers on damaged files")
struct HostileInputTests {
    static let goldens: [(DeviceFormat, String)] = [
        (.sonic, "sonic-site.json"), (.sonic, "sonic-config.json"), (.junos, "junos-site.txt"),
        (.junos, "junos-config.txt"),
    ]

    @Test(arguments: 0..<goldens.count)
    func damagedFilesDoNotTrap(index: Int) throws {
        let (format, name) = Self.goldens[index]
        let importer = try #require(format.importer)
        let original = Array(
            try String(
                contentsOf: DeviceFixtures.dataDirectory.appendingPathComponent("golden/\(name)"),
                encoding: .utf8
            ).utf8)
        // The undamaged file imports cleanly: the damage is what the cases test.
        #expect(try !importer.parse(String(decoding: original, as: UTF8.self), file: name).isEmpty)
        var results = (parsed: 0, refused: 0)
        for seed in RandomDomain.seeds {
            var g = SeededGenerator(seed: seed)
            var bytes = original
            for _ in 0..<Int.random(in: 1...6, using: &g) {
                let at = Int.random(in: 0..<max(1, bytes.count), using: &g)
                switch Int.random(in: 0..<5, using: &g) {
                case 0: bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...40, using: &g)))
                case 1: bytes.insert(UInt8.random(in: 0...255, using: &g), at: at)
                case 2: if at < bytes.count { bytes[at] = UInt8.random(in: 0x20...0x7e, using: &g) }
                case 3: bytes = Array(bytes.prefix(at))
                default:
                    let end = min(bytes.count, at + 200)
                    bytes.insert(contentsOf: bytes[at..<end], at: at)
                }
            }
            do {
                _ = try importer.parse(String(decoding: bytes, as: UTF8.self), file: name)
                results.parsed += 1
            } catch {
                // One line, naming the place.
                #expect(!error.description.contains("\n"), "seed \(seed): \(error.description)")
                #expect(error.description.hasPrefix(name), "seed \(seed): \(error.description)")
                results.refused += 1
            }
        }
        #expect(results.parsed + results.refused == RandomDomain.seeds.count)
        // Damage that no importer ever notices would mean the cases are too gentle.
        #expect(results.refused > 0)
    }
}
