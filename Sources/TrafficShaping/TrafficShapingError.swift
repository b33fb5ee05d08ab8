import SystemPackage

/// A failed tc or link request and its errno, with the kernel's own words
/// when it gave them.
public struct TrafficShapingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The request that failed.
    public enum Operation: String, Sendable, Hashable {
        /// `mnl_socket_open(NETLINK_ROUTE)`.
        case open = "mnl_socket_open"
        /// `mnl_socket_bind`.
        case bind = "mnl_socket_bind"
        /// `RTM_NEWQDISC`: add, replace or change a qdisc.
        case newQdisc = "RTM_NEWQDISC"
        /// `RTM_DELQDISC`.
        case deleteQdisc = "RTM_DELQDISC"
        /// `RTM_GETQDISC` (a dump).
        case getQdisc = "RTM_GETQDISC"
        /// `RTM_NEWTCLASS`: add, replace or change a class.
        case newClass = "RTM_NEWTCLASS"
        /// `RTM_DELTCLASS`.
        case deleteClass = "RTM_DELTCLASS"
        /// `RTM_GETTCLASS` (a dump).
        case getClass = "RTM_GETTCLASS"
        /// `RTM_NEWLINK`: create a link, or set one up or down.
        case newLink = "RTM_NEWLINK"
        /// `RTM_DELLINK`.
        case deleteLink = "RTM_DELLINK"
        /// `RTM_NEWTFILTER`: add a filter.
        case newFilter = "RTM_NEWTFILTER"
        /// `RTM_DELTFILTER`.
        case deleteFilter = "RTM_DELTFILTER"
        /// `RTM_GETTFILTER` (a dump).
        case getFilter = "RTM_GETTFILTER"
    }

    /// The request that failed.
    public var operation: Operation
    /// Why: swift-system's `Errno`, e.g. `.fileExists` (EEXIST) for a qdisc
    /// added with the exclusive flag where one is, `.noSuchFileOrDirectory`
    /// (ENOENT) for a missing qdisc or class or an unknown qdisc kind,
    /// `.notPermitted` (EPERM) without CAP_NET_ADMIN, `.timedOut` when the
    /// kernel did not answer.
    public var errno: Errno
    /// What the request was about: `htb 1:`, `bfifo 10: parent 1:10`,
    /// `htb class 1:10`, `ifb qmifb0`; nil when the operation says it all.
    public var subject: String?
    /// The interface, when the request had one.
    public var ifindex: Int32?
    /// The kernel's extended ack (`NLMSGERR_ATTR_MSG`), e.g. `Exclusivity
    /// flag on, cannot modify`; nil when it gave none.
    public var kernelMessage: String?

    /// Creates an error.
    public init(
        operation: Operation, errno: Errno, subject: String? = nil, ifindex: Int32? = nil,
        kernelMessage: String? = nil
    ) {
        self.operation = operation
        self.errno = errno
        self.subject = subject
        self.ifindex = ifindex
        self.kernelMessage = kernelMessage
    }

    /// `<request> [<subject>] [on ifindex N]: <strerror> (errno N)[: <kernel message>]`,
    /// e.g. `RTM_NEWQDISC htb 1: on ifindex 5: File exists (errno 17): Exclusivity flag on, cannot modify`.
    public var description: String {
        operation.rawValue + (subject.map { " \($0)" } ?? "") + (ifindex.map { " on ifindex \($0)" } ?? "")
            + ": \(errno) (errno \(errno.rawValue))" + (kernelMessage.map { ": \($0)" } ?? "")
    }
}
