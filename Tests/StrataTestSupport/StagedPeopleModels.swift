import Foundation
public import StrataModel

/// The people models of the staged-migration crash test (spec 0006 §19.6), shared by the test
/// and the `StrataContextProbe staged` process it kills: version 1 has a mandatory `name`,
/// version 2 adds optional `firstName` and `lastName` beside it, version 3 drops `name` and
/// makes the two mandatory — so inferred migration alone can't go from 1 to 3.
public enum StagedPeopleModels {
    /// Model version `number` (1, 2 or 3; any other is version 3), its version identifier the
    /// number.
    public static func version(_ number: Int) throws -> ManagedObjectModel {
        var model: ManagedObjectModel
        switch number {
        case 1:
            model = try ManagedObjectModel { Entity("Person") { Attribute("name", .string).required().providedAtInsert() } }
        case 2:
            model = try ManagedObjectModel {
                Entity("Person") { Attribute("name", .string); Attribute("firstName", .string); Attribute("lastName", .string) }
            }
        default:
            model = try ManagedObjectModel {
                Entity("Person") {
                    Attribute("firstName", .string).required().providedAtInsert(); Attribute("lastName", .string).required().providedAtInsert()
                }
            }
        }
        model.versionIdentifiers = [number == 1 || number == 2 ? "\(number)" : "3"]
        return model
    }

    /// The first and last name a version-1 `name` splits into: trimmed, split at its first
    /// space.
    public static func split(_ name: String) -> (first: String, last: String) {
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        let parts = trimmed.split(separator: " ", maxSplits: 1).map(String.init)
        return (parts.first ?? "", parts.count > 1 ? parts[1] : "")
    }
}
