import Foundation
import Strata
import StrataModel
import StrataTestSupport
import Testing

@Suite("Porting a Core Data app: errors as NSError")
struct PortingErrorTests {
    @Test("fix: errors as a Core Data app reads them — NSCocoaErrorDomain, Core Data's code, localizedDescription and userInfo keys (before: domain Strata.ContextError, code 0, 'The operation could not be completed')")
    func errorsAsNSError() async throws {
        let dir = try TemporaryDirectory()
        let container = try libraryContainer(dir)
        try await container.performBackgroundTask { (context: isolated ManagedObjectContext) throws in
            let book = try context.insertNewObject(forEntityName: "Book")      // title missing
            do {
                try context.save()
                Issue.record("saved")
            } catch {
                // `catch let error as NSError` doesn't match a Swift error on Linux (no
                // conditional bridging); the unconditional `as NSError` does.
                let error = error as NSError
                #expect(error.domain == NSCocoaErrorDomain)
                #expect(error.code == 1570)
                #expect(error.localizedDescription.contains("Book.title"), "\(error.localizedDescription)")
                #expect(error.userInfo[ErrorUserInfoKey.validationKey] as? String == "title")
                #expect(error.userInfo[ErrorUserInfoKey.validationObject] as? URL == book.objectID.uriRepresentation())
                #expect(error.userInfo[ErrorUserInfoKey.validationValue] == nil)
            }
            book.setValue("many", forKey: "pages")
            do {
                try context.save()
                Issue.record("saved")
            } catch {
                let ns = error as NSError
                #expect(ns.code == 1560)
                let details = ns.userInfo[ErrorUserInfoKey.detailedErrors] as? [NSError]
                #expect(details?.map(\.code).sorted() == [1550, 1570])
                #expect(details?.compactMap { $0.userInfo[ErrorUserInfoKey.validationKey] as? String }.sorted() == ["pages", "title"])
                #expect(error.localizedDescription.contains("Book.pages") && error.localizedDescription.contains("Book.title"))
            }
            context.rollback()
            let gone = try context.insertNewObject(forEntityName: "Tag")
            gone.setValue("x", forKey: "name")
            try context.save()
            let id = gone.objectID
            context.delete(gone)
            try context.save()
            do {
                _ = try context.existingObject(with: id)
                Issue.record("found")
            } catch {
                let error = error as NSError
                #expect(error.code == 133000)
                #expect(error.localizedDescription.contains(id.description))
            }
        }
        // A model value validated on its own.
        let failure = try #require(try SeedModels.run.validateValue(.int32(-1), forKey: "processID", in: "Run").first)
        let ns = failure as NSError
        #expect(ns.code == 1550 && ns.localizedDescription.contains("Process ID must not be less than 1"))
        #expect(ns.userInfo[ErrorUserInfoKey.validationValue] as? Int32 == -1)
    }
}
