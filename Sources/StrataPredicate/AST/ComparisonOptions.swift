// MARK: - ComparisonOptions

/// String comparison options written after the operator: `[c]`, `[d]`, `[n]`, `[cd]`
/// (Core Data's `NSComparisonPredicate.Options`).
///
/// `c` folds case, `d` folds diacritics; `n` (normalized) is accepted and has no further
/// effect because Swift strings always compare canonically.
///
/// ```swift
/// try FormatPredicate(format: "name ==[cd] 'resume'").evaluate(with: ["name": "Résumé"])  // true
/// ```
public struct ComparisonOptions: OptionSet, Sendable, Hashable {
    /// The option bits.
    public let rawValue: Int

    /// Creates options from bits.
    ///
    /// Prefer the named options.
    ///
    /// ```swift
    /// let options = ComparisonOptions(rawValue: 3)  // [.caseInsensitive, .diacriticInsensitive]
    /// ```
    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    /// `[c]`: case-insensitive.
    public static let caseInsensitive = ComparisonOptions(rawValue: 1)
    /// `[d]`: diacritic-insensitive.
    public static let diacriticInsensitive = ComparisonOptions(rawValue: 2)
    /// `[n]`: normalized (accepted; no further effect).
    public static let normalized = ComparisonOptions(rawValue: 4)

    /// The option letters in canonical order (`"cd"`), empty when none.
    var letters: String {
        (contains(.caseInsensitive) ? "c" : "") + (contains(.diacriticInsensitive) ? "d" : "")
            + (contains(.normalized) ? "n" : "")
    }
}
