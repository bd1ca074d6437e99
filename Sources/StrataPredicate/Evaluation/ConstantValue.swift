// MARK: - ConstantValue

/// A runtime value converted from a constant. Constants never convert to `Value.object`,
/// so the value holds no caller objects and is immutable: safe to share.
final class ConstantValue: @unchecked Sendable {
    let value: Value

    init(_ value: Value) {
        self.value = value
    }
}
