import Foundation
import StrataLog
import StrataModel
import StrataTestSupport

/// A model that exercises every storage path: inheritance (Member ← Captain), an indexed and
/// a unique attribute, one-to-many with a to-one recorded side, an ordered to-many, a
/// many-to-many, a one-to-one, a to-many without inverse, and a transient attribute.
func libraryModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Club") {
            Attribute("name", .string)
            Attribute("founded", .date)
            Relationship("members", to: "Member", inverse: "club", toMany: true)
            Relationship("lineup", to: "Member", inverse: "lineupClub", toMany: true, ordered: true)
            Relationship("sponsors", to: "Sponsor", inverse: "clubs", toMany: true)
            Relationship("badge", to: "Badge", inverse: "club")
        }
        Entity("Member") {
            Attribute("name", .string)
            Attribute("email", .string).indexed()
            Attribute("age", .int32).indexed()
            Attribute("rating", .double)
            Attribute("notes", .string, transient: true)
            Relationship("club", to: "Club", inverse: "members")
            Relationship("lineupClub", to: "Club", inverse: "lineup")
            Relationship("favourites", to: "Sponsor", toMany: true)
            Unique("email")
        }
        Entity("Captain", parent: "Member") {
            Attribute("since", .date)
        }
        Entity("Sponsor") {
            Attribute("name", .string)
            Relationship("clubs", to: "Club", inverse: "sponsors", toMany: true)
        }
        Entity("Badge") {
            Attribute("colour", .string)
            Relationship("club", to: "Club", inverse: "badge")
        }
    }
}

func s(_ text: String) -> DraftValue { .attribute(.string(text)) }
func i(_ n: Int32) -> DraftValue { .attribute(.int32(n)) }

/// Opens a store in `directory` with `model`. The log's tests migrate through models that
/// remove entities and properties on purpose, so the fixture allows that (spec 0004 §4.7: a
/// model lacking what the store's has is refused unless allowed); `configure` may turn it off.
func openLog(_ directory: TemporaryDirectory, model: ManagedObjectModel, configure: (inout EventLog.Configuration) -> Void = { _ in })
    throws -> EventLog
{
    var configuration = EventLog.Configuration()
    configuration.initialMapSize = 4 << 20
    configuration.allowsRemovingEntitiesAndProperties = true
    configure(&configuration)
    return try EventLog(path: directory.file("store"), model: model, configuration: configuration)
}
