// MARK: - ConstantValue

/// A runtime value converted from a constant. Constants never convert to `Value.object`,
/// so the value holds no caller objects and is immutable: safe to share.
final class ConstantValue: @unchecked Sendable {
    let value: Value
    /// For a collection of object identities only (`SELF IN %@` with objects or IDs): the
    /// identities, so `IN` is a lookup rather than a comparison with each element.
    let identities: Set<AnyHashable>?
    /// For a collection of strings only (`name IN {"a", "b", …}`): the strings, so `IN`
    /// without `[c]` or `[d]` is a lookup (Swift's `String` equality and hashing both go by
    /// canonical equivalence, as the comparison does).
    let strings: Set<String>?
    /// For a collection of integers only (`remoteID IN {…}`): the integers, so `IN` is a
    /// lookup for an integer or a Boolean (which compare with integers exactly); other
    /// numbers are compared with each element (a double compares with an integer as a
    /// double, which a set of integers can't answer).
    let integers: Set<Int>?

    init(_ value: Value) {
        self.value = value
        guard case .collection(let elements) = value, !elements.isEmpty else {
            identities = nil
            strings = nil
            integers = nil
            return
        }
        var identities: Set<AnyHashable>? = []
        var strings: Set<String>? = []
        var integers: Set<Int>? = []
        for element in elements {
            switch element {
            case .identity(let identity):
                identities?.insert(AnyHashable(identity))
                strings = nil
                integers = nil
            case .string(let string):
                strings?.insert(string)
                identities = nil
                integers = nil
            case .int(let integer):
                integers?.insert(integer)
                identities = nil
                strings = nil
            default:
                identities = nil
                strings = nil
                integers = nil
            }
            if identities == nil && strings == nil && integers == nil { break }
        }
        self.identities = identities
        self.strings = strings
        self.integers = integers
    }
}
