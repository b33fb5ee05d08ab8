import QoSMapCore
package import QoSMapYAML

// An interface's `queues:` (issue 38), read here so that qosmapd and `qosmap
// export nft|tc --config` (which cannot link the daemon) read it the same way.
extension MarkingConfigReader {
    /// The keys of an interface's `queues:`.
    package static let queueKeys = ["rate", "ingress-rate", "scheduling", "pq-max", "discipline", "replace"]

    /// One interface's `queues:`, or nil after reporting each problem at the
    /// token that has it.
    package mutating func queueConfig(_ node: Node, interface name: String) -> QueueConfig? {
        guard let pairs = mapping(node, "queues of '\(name)'", allowed: Self.queueKeys) else { return nil }
        let before = yaml.diagnostics.count
        var rate: Rate?
        var rateNode: Node?
        var ingressRate: Rate?
        var scheduling: [(ServiceClass, QueueScheduling)] = []
        var schedulingNode: Node?
        var pqMax = QueueConfig.defaultPQMaxPercent
        var discipline = QueueDiscipline.htb
        var replace = false
        for (_, v, k) in pairs {
            switch k {
            case "rate":
                rateNode = v
                rate = self.rate(v)
            case "ingress-rate":
                // Where it applies (qosmapd's ebpf datapath) is the caller's check.
                ingressRateNodes.append(v)
                ingressRate = self.rate(v)
            case "scheduling":
                schedulingNode = v
                scheduling = self.scheduling(v)
            case "pq-max":
                if let token = yaml.scalar(v, "pq-max") {
                    do throws(QueueConfigError) {
                        pqMax = try QueueConfig.parsePercent(token)
                    } catch {
                        yaml.error(v, error.description)
                    }
                }
            case "discipline":
                switch yaml.scalar(v, "a queue discipline") {
                case "htb": discipline = .htb
                case "cake": discipline = .cake(.diffserv8)
                case let other?: yaml.error(v, "invalid discipline '\(other)'; allowed: htb, cake")
                case nil: break
                }
            default:
                replace = yaml.bool(v, "replace flag") ?? false
            }
        }
        guard let rate else {
            if rateNode == nil {
                yaml.error(node, "queues of '\(name)' need a rate; allowed: \(Rate.allowedText)")
            }
            return nil
        }
        guard yaml.diagnostics.count == before else { return nil }
        do throws(QueueConfigError) {
            return try QueueConfig(
                rate: rate, ingressRate: ingressRate, scheduling: scheduling, pqMaxPercent: pqMax,
                discipline: discipline, replace: replace)
        } catch {
            // What is left is about the rate (too low, zero) or the scheduling.
            switch error {
            case .rateNotPositive, .rateTooLow: yaml.error(rateNode ?? node, error.description)
            default: yaml.error(schedulingNode ?? node, error.description)
            }
            return nil
        }
    }

    /// A rate token that must have a unit.
    package mutating func rate(_ node: Node) -> Rate? {
        guard let token = yaml.scalar(node, "a rate") else { return nil }
        do throws(QueueConfigError) {
            return try Rate(parsing: token, requiringUnit: true)
        } catch {
            yaml.error(node, error.description)
            return nil
        }
    }

    /// `scheduling:`: CLASS: pq, or CLASS: {wfq: WEIGHT}; a class written
    /// twice (also as `ef` and `EF`) is reported at its second key.
    package mutating func scheduling(_ node: Node) -> [(ServiceClass, QueueScheduling)] {
        var result: [(ServiceClass, QueueScheduling)] = []
        for (k, v, name) in mapping(node, "scheduling", allowed: []) ?? [] {
            guard let serviceClass = ServiceClass(name: name) else {
                yaml.error(k, "unknown service class '\(name)'; allowed: \(ServiceClass.allowedNames)")
                continue
            }
            if result.contains(where: { $0.0 == serviceClass }) {
                yaml.error(k, QueueConfigError.classScheduledTwice(serviceClass).description)
                continue
            }
            let how =
                "pq or {wfq: WEIGHT} (WEIGHT \(QueueScheduling.weights.lowerBound)-\(QueueScheduling.weights.upperBound))"
            switch v {
            case .scalar:
                let word = yaml.scalar(v, "a scheduling")
                if word == "pq" {
                    result.append((serviceClass, .pq))
                } else {
                    yaml.error(v, "invalid scheduling '\(word ?? "")' for \(serviceClass); allowed: \(how)")
                }
            case .mapping:
                for (_, wv, _) in mapping(v, "scheduling of \(serviceClass)", allowed: ["wfq"]) ?? [] {
                    guard let text = yaml.scalar(wv, "a wfq weight") else { continue }
                    if let weight = Int(text), QueueScheduling.weights.contains(weight) {
                        result.append((serviceClass, .wfq(weight: weight)))
                    } else {
                        yaml.error(
                            wv,
                            "invalid wfq weight '\(text)' of \(serviceClass); allowed: \(QueueScheduling.weights.lowerBound)-\(QueueScheduling.weights.upperBound)"
                        )
                    }
                }
            case .sequence:
                yaml.error(v, "expected a scheduling for \(serviceClass), found a sequence; allowed: \(how)")
            }
        }
        return result
    }

}
