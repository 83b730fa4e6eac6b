// Sources the macro expansion tests expand.
enum Cases {
    static let allGuides = #"""
        @Generable(description: "A character")
        struct Character {
            @Guide(description: "Name", .constant("Ser Plinth"))
            var name: String
            @Guide(.anyOf(["a", "b"]))
            var kind: String
            @Guide(.pattern(/[a-z]+/))
            var code: String
            @Guide(description: "A phone number", /\d{3}-\d{4}/)
            var phone: String?
            @Guide(.range(1...100))
            var level: Int
            @Guide(.minimum(0.5), .maximum(2.5))
            var speed: Double
            @Guide(.count(3))
            var tags: [String]
            @Guide(.count(1...4), .element(.range(1...6)))
            var dice: [Int]
            @Guide(.minimumCount(1), .maximumCount(5))
            var friends: [Character]
            let fixed = 1
            var computed: Int { 2 }
            static var shared = 3
        }
        """#

    static let simpleEnum = """
        @Generable(description: "A team")
        public enum Team {
            case red, blue
            case `default`
        }
        """

    static let payloadEnum = """
        @Generable
        enum Action {
            case idle
            case attack(target: String, damage: Int)
            case move(Int, Int?)
        }
        """

    static let options = """
        @Generable(name: "Renamed", description: "x", representNilExplicitlyInGeneratedContent: true)
        struct Options: Sendable {
            var id: String
            var note: String?
        }
        """
}
