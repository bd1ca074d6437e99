import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Session 27 review of object identity, URIs and the store stack (specs 0005, 0006 §3, §19).
@Suite("Identity review (session 27)")
struct IdentityReviewTests {
    /// The error `body` throws, or nil with a recorded issue.
    func thrown(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> (any Error)? {
        do {
            try body()
            Issue.record("expected an error, got none", sourceLocation: sourceLocation)
        } catch {
            return error
        }
        return nil
    }

    // MARK: - URIs

    @Test("fix: the URI of an object of every entity name the model allows resolves back to its ID and decodes (before, ⅫTeam's and TeamⒶ's resolved to nil and didn't decode: the parser had a narrower rule of its own)")
    func everyModelNameRoundTrips() async throws {
        for name in ["ⅫTeam", "TeamⒶ", "Café", "_Under", "日本", "Ω2"] {
            let model = try ManagedObjectModel { Entity(name) { Attribute("name", .string) } }
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: model)
            let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let object = try context.insertNewObject(forEntityName: name)
                object.setValue("value of \(name)", forKey: "name")
                try context.save()
                return object.objectID
            }
            let uri = id.uriRepresentation()
            #expect(ObjectURI.parse(uri) != nil, "\(name): \(uri)")
            #expect(coordinator.managedObjectID(forURIRepresentation: uri) == id, "\(name): \(uri)")
            let decoded = try? JSONDecoder().decode(ManagedObjectID.self, from: JSONEncoder().encode(id))
            #expect(decoded == id, "\(name)")
            let value = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                guard let resolved = coordinator.managedObjectID(forURIRepresentation: uri) else { return nil as String? }
                return try context.existingObject(with: resolved).value(forKey: "name") as? String
            }
            #expect(value == "value of \(name)")
        }
        // Names the model refuses stay refused.
        for text in ["x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/1Team/p1", "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Te-am/p1",
                     "x-strata://6F1C2A3B-0000-4000-8000-00000000ABCD/Te%20am/p1", "x-strata:///%E2%91%A0Team/t6F1C2A3B-0000-4000-8000-00000000ABCD"] {
            #expect(ObjectURI.parse(text) == nil, "\(text)")
        }
    }
}
