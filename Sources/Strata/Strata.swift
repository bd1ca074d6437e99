@_exported public import StrataModel
@_exported public import StrataPredicate
@_exported public import StrataLog
@_exported public import StrataStorage

/// Strata's version, printed by `strata --version`.
public enum StrataVersion {
    /// The semantic version of this build of Strata.
    public static let current = "0.1.0"
}
