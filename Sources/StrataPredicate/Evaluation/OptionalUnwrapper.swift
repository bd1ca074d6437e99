internal import Foundation

// MARK: - OptionalUnwrapper

/// Unwraps values that arrive as `Any` but hold an optional (possibly nested), and treats
/// `NSNull` as nil. Package-wide: a managed object's setters take a nil optional as nil
/// through it too.
package enum OptionalUnwrapper {
    package static func flatten(_ value: Any?) -> Any? {
        guard var current = value else { return nil }
        while let optional = current as? any OptionalBox {
            guard let wrapped = optional.wrappedAny else { return nil }
            current = wrapped
        }
        if current is NSNull { return nil }
        return current
    }
}

/// Lets `OptionalUnwrapper` see through an `Optional` hidden in an `Any`.
protocol OptionalBox {
    var wrappedAny: Any? { get }
}

extension Optional: OptionalBox {
    var wrappedAny: Any? {
        switch self {
        case .some(let wrapped): wrapped
        case .none: nil
        }
    }
}
