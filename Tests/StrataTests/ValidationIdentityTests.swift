import Foundation
import Strata
import StrataTestSupport
import Testing

// Review 33-6: validation and object identity at the context layer.

enum ValidationIdentityModels {
    /// `Shelf` holds `items` (required, to-many, deny) of the abstract `Item`, whose
    /// concrete sub-entities are `Book` and `Disc`; `favorite` is a to-one to a `Book`;
    /// `labels` is an optional to-many with a minimum of 2; `itemCount` is derived.
    static var library: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Shelf") {
                    Attribute("name", .string)
                    Attribute("note", .string).transient().length(max: 4)
                    Attribute("itemCount", .int32).derived(from: "items.@count")
                    Relationship("items", to: "Item", inverse: "shelf", toMany: true, deleteRule: .deny).required()
                    Relationship("favorite", to: "Book", inverse: "favoredBy")
                    Relationship("labels", to: "Label", inverse: "shelf", toMany: true).count(min: 2, max: 3)
                }
                Entity("Item", abstract: true) {
                    Attribute("title", .string).required().providedAtInsert().length(max: 10)
                    Relationship("shelf", to: "Shelf", inverse: "items")
                }
                Entity("Book", parent: "Item") {
                    Attribute("pages", .int16).range(min: .int16(1), max: .int16(5000))
                    Relationship("favoredBy", to: "Shelf", inverse: "favorite", toMany: true)
                }
                Entity("Disc", parent: "Item") {
                    Attribute("minutes", .int16)
                }
                Entity("Label") {
                    Attribute("text", .string)
                    Relationship("shelf", to: "Shelf", inverse: "labels")
                }
            }
        }
    }
}

/// The validation failures `body` throws, or nil with a recorded issue.
private func failures(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> [ValidationFailure]? {
    do {
        try body()
        Issue.record("expected a validation error, got none", sourceLocation: sourceLocation)
    } catch ContextError.validation(let found) {
        return found
    } catch {
        Issue.record("expected a validation error, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

@Suite("Review 33-6: validation and object identity")
struct ValidationIdentityTests {
    @Test("a required to-many left empty fails with 1580, as Core Data counts a to-many's set (a nil to-one is the missing value, 1570); below the minimum 1580, above the maximum 1590; NSValidationErrorValue holds the destinations' URIs, not a count; several failures are 1560 with each under NSDetailedErrors")
    func relationshipCounts() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try ValidationIdentityModels.library)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try context.insertNewObject(forEntityName: "Shelf")
            let shelfURI = shelf.objectID.uriRepresentation()
            // Before, 1570 (missing mandatory), as for a nil to-one.
            let empty = failures { try context.save() }
            #expect(empty?.map(\.code.rawValue) == [1580])
            #expect(empty?.first?.key == "items" && empty?.first?.object == shelfURI)
            let emptyError = ContextError.validation(empty ?? []) as NSError
            #expect(emptyError.code == 1580)
            #expect(emptyError.userInfo[ErrorUserInfoKey.validationKey] as? String == "items")
            #expect(emptyError.userInfo[ErrorUserInfoKey.validationObject] as? URL == shelfURI)
            #expect((emptyError.userInfo[ErrorUserInfoKey.validationValue] as? [URL])?.isEmpty == true)
            var none: Any? = Set<ManagedObject>()
            let direct = failures { try shelf.validateValue(&none, forKey: "items") }
            #expect(direct?.map(\.code.rawValue) == [1580])
            let book = try context.insertNewObject(forEntityName: "Book")
            book.setValue("Emma", forKey: "title")
            shelf.setValue(Set([book]), forKey: "items")
            let label = try context.insertNewObject(forEntityName: "Label")
            shelf.setValue(Set([label]), forKey: "labels")
            let short = failures { try context.save() }
            #expect(short?.map(\.code.rawValue) == [1580])
            let shortError = ContextError.validation(short ?? []) as NSError
            // Before, the count (1) as an Int64.
            #expect(shortError.userInfo[ErrorUserInfoKey.validationValue] as? [URL] == [label.objectID.uriRepresentation()])
            let labels = try (0..<3).map { _ in try context.insertNewObject(forEntityName: "Label") }
            shelf.setValue(Set(labels + [label]), forKey: "labels")
            shelf.setValue(Set<ManagedObject>(), forKey: "items")
            let several = failures { try context.save() } ?? []
            #expect(Set(several.map { "\($0.code.rawValue) \($0.key)" }) == ["1590 labels", "1580 items"])
            let severalError = ContextError.validation(several) as NSError
            #expect(severalError.code == 1560)
            let details = severalError.userInfo[ErrorUserInfoKey.detailedErrors] as? [NSError] ?? []
            #expect(details.map(\.code).sorted() == [1580, 1590])
            #expect(details.allSatisfy { $0.userInfo[ErrorUserInfoKey.validationObject] as? URL == shelfURI })
            #expect(details.compactMap { $0.userInfo[ErrorUserInfoKey.validationKey] as? String }.sorted() == ["items", "labels"])
            #expect((details.first { $0.code == 1590 }?.userInfo[ErrorUserInfoKey.validationValue] as? [URL])?.count == 4)
            shelf.setValue(Set(labels), forKey: "labels")
            shelf.setValue(Set([book]), forKey: "items")
            try context.save()
            // An optional to-many may be empty whatever its minimum (Core Data: counts apply to a value that isn't nil).
            shelf.setValue(Set<ManagedObject>(), forKey: "labels")
            try context.save()
        }
    }

    @Test("a child relates its player to a team an unrelated context inserted, by its temporary ID: refused at set time (1550 naming the relationship and another context), and object(with:) of the ID throws — before, accepted, and the push or the parent's save failed later; the parent's unsaved team is still accepted, and both saves go through")
    func childForeignTemporaryID() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, _) = try await leagueStore(dir)
        let parent = privateContext(coordinator, name: "parent")
        let child = childContext(parent, name: "child")
        let strayID = try await privateContext(coordinator, name: "other").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Strays", forKey: "name")
            return team.objectID
        }
        let kitesID = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let kites = try context.insertNewObject(forEntityName: "Team")
            kites.setValue("Kites", forKey: "name")
            return kites.objectID
        }
        try await child.perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue("Ng", forKey: "lastName")
            player.setValue(strayID, forKey: "team")
            let byID = failures { try context.save() }
            #expect(byID?.count == 1 && byID?.first?.code.rawValue == 1550 && byID?.first?.key == "team")
            #expect(byID?.first?.message.contains("another context") == true, "\(byID ?? [])")
            #expect(byID?.first?.object == player.objectID.uriRepresentation())
            // No fault is made for the ID (session 34: object(with:) throws, naming it).
            do {
                _ = try context.object(with: strayID)
                Issue.record("object(with:) gave an object for another context's temporary ID")
            } catch ContextError.invalidObject(let detail) {
                #expect(detail.contains("another context's temporary ID"), "\(detail)")
            }
            // The parent's unsaved team, by its temporary ID: accepted.
            player.setValue(kitesID, forKey: "team")
            try context.save()
        }
        try await parent.perform { (context: isolated ManagedObjectContext) throws in try context.save() }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let players = try context.fetch(FetchRequest(entityName: "Player"))
            #expect(players.count == 1)
            #expect((players.first?.value(forKey: "team") as? ManagedObject)?.value(forKey: "name") as? String == "Kites")
            var strays = FetchRequest<ManagedObject>(entityName: "Team")
            strays.predicate = try FormatPredicate(format: "name == %@", "Strays")
            #expect(try context.count(for: strays) == 0)
        }
    }

    @Test("validateValue(_:forKey:) called by the app on a sub-entity of an abstract entity names the object and key (before: no object); a deny rule refusing, in a child context, the delete of its parent's unsaved shelf: 1600 naming object and key, its objects under NSValidationErrorValue")
    func subEntityAndNestedDeny() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try ValidationIdentityModels.library)
        let parent = privateContext(coordinator, name: "parent")
        let (shelfID, bookID) = try await parent.perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try context.insertNewObject(forEntityName: "Shelf")
            let book = try context.insertNewObject(forEntityName: "Book")
            book.setValue("Emma", forKey: "title")
            book.setValue(shelf, forKey: "shelf")
            // An inherited attribute's rule, on the sub-entity's object.
            var long: Any? = "A very long title"
            let title = failures { try book.validateValue(&long, forKey: "title") }
            #expect(title?.map { "\($0.code.rawValue) \($0.entity).\($0.key)" } == ["1660 Book.title"])
            #expect(title?.first?.object == book.objectID.uriRepresentation())
            // A relationship's value, checked for the app: the object named too.
            var none: Any? = Set<ManagedObject>()
            let items = failures { try shelf.validateValue(&none, forKey: "items") }
            #expect(items?.first?.key == "items" && items?.first?.object == shelf.objectID.uriRepresentation())
            // A Disc is an Item, not the Book `favorite` holds.
            let disc = try context.insertNewObject(forEntityName: "Disc")
            var discValue: Any? = disc
            let favorite = failures { try shelf.validateValue(&discValue, forKey: "favorite") }
            #expect(favorite?.map(\.code.rawValue) == [1550])
            #expect(favorite?.first?.object == shelf.objectID.uriRepresentation())
            context.delete(disc)
            return (shelf.objectID, book.objectID)
        }
        try await childContext(parent, name: "child").perform { (context: isolated ManagedObjectContext) throws in
            let shelf = try context.existingObject(with: shelfID)
            context.delete(shelf)
            let direct = failures { try shelf.validateForDelete() }
            #expect(direct?.map(\.code.rawValue) == [1600])
            let found = failures { try context.save() }
            #expect(found?.count == 1 && found?.first?.code.rawValue == 1600 && found?.first?.key == "items")
            let error = ContextError.validation(found ?? []) as NSError
            #expect(error.code == 1600)
            #expect(error.userInfo[ErrorUserInfoKey.validationObject] as? URL == shelfID.uriRepresentation())
            #expect(error.userInfo[ErrorUserInfoKey.validationKey] as? String == "items")
            // Before, absent.
            #expect(error.userInfo[ErrorUserInfoKey.validationValue] as? [URL] == [bookID.uriRepresentation()])
        }
    }
}
