import QoSMapCore

/// SplitMix64: a seeded generator, so a failing property test names a seed
/// that reproduces it.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Random total domains for property tests.
enum RandomDomain {
    /// A domain with every cell drawn at random (classes, colors, values and the DEI policy).
    static func make(name: String = "random", seed: UInt64) -> DSDomain {
        var g = SeededGenerator(seed: seed)
        var b = DomainBuilder(name: name)
        for field in Field.allCases {
            for v in 0..<field.valueCount {
                let t = Treatment(
                    ServiceClass.allCases.randomElement(using: &g)!, Color.allCases.randomElement(using: &g)!)
                b.setInbound(field, UInt8(v), t)
            }
            for t in Treatment.allCells {
                b.setOutbound(field, t, UInt8.random(in: 0...UInt8(field.maxValue), using: &g))
            }
        }
        b.dropEligibility = DropEligibility.allCases.randomElement(using: &g)!
        // swift-format-ignore: every cell is set above, so build cannot fail.
        return try! b.build()
    }

    /// The seeds the property tests run: fixed, so a run is reproducible.
    static let seeds: [UInt64] = (1...200).map { UInt64($0) &* 0x1000_0001 }
}
