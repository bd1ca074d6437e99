// MARK: - ConstantValue

/// A runtime value converted from a constant. Constants never convert to `Value.object`,
/// so the value holds no caller objects and is immutable: safe to share.
final class ConstantValue: @unchecked Sendable {
    let value: Value
    /// For a collection of object identities only (`SELF IN %@` with objects or IDs): the
    /// identities, so `IN` is a lookup rather than a comparison with each element.
    let identities: Set<AnyHashable>?

    init(_ value: Value) {
        self.value = value
        if case .collection(let elements) = value, !elements.isEmpty {
            var identities: Set<AnyHashable> = []
            for element in elements {
                guard case .identity(let identity) = element else {
                    self.identities = nil
                    return
                }
                identities.insert(AnyHashable(identity))
            }
            self.identities = identities
        } else {
            identities = nil
        }
    }
}
