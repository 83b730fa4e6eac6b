// Samples of Apple's documentation of tools and guided generation, and of the WWDC25 sessions
// "Meet the Foundation Models framework" (286) and "Deep dive into the Foundation Models
// framework" (301), as published.
import Foundation
import FoundationModels

// https://developer.apple.com/documentation/foundationmodels/generable
enum GenerablePage {
    @Generable
    struct SearchSuggestions {
        @Guide(description: "A list of suggested search terms.", .count(4))
        var searchTerms: [SearchTerm]

        @Generable
        struct SearchTerm {
            // Use a generation identifier for data structures the framework generates.
            var id: GenerationID

            @Guide(description: "A two- or three- word search term, like 'Beautiful sunsets'.")
            var searchTerm: String
        }
    }
}

// https://developer.apple.com/documentation/foundationmodels/expanding-generation-with-tool-calling
enum ToolCalling {
    struct BreadDatabaseTool: Tool {
        let name = "searchBreadDatabase"
        let description = "Searches a local database for bread recipes."

        @Generable
        struct Arguments {
            @Guide(description: "The type of bread to search for")
            var searchTerm: String
            @Guide(description: "The number of recipes to get", .range(1...6))
            var limit: Int
        }

        @Generable
        struct Recipe {
            var name: String
            var description: String
            var link: String
        }

        func call(arguments: Arguments) async throws -> [Recipe] {
            var recipes: [Recipe] = []

            // Put your code here to retrieve a list of recipes from your database.
            recipes.append(Recipe(name: arguments.searchTerm, description: "", link: ""))
            return recipes
        }
    }

    static func samples() async throws {
        let session = LanguageModelSession(
            tools: [BreadDatabaseTool()]
        )

        let response = try await session.respond(
            to: "Find three sourdough bread recipes"
        )
        _ = response

        let required = try await session.respond(
            to: "What's a good sourdough recipe?",
            options: GenerationOptions(toolCallingMode: .required)
        )
        _ = required

        let summary = try await session.respond(
            to: "Summarize the recipes you found",
            options: GenerationOptions(toolCallingMode: .disallowed)
        )
        _ = summary

        do {
            let answer = try await session.respond(to: "Find a recipe for tomato soup.")
            _ = answer
        } catch let error as LanguageModelSession.ToolCallError {
            // Access the name of the tool, like BreadDatabaseTool.
            print(error.tool.name)

            // Access an underlying error that your tool throws and check if the tool
            // encounters a specific condition.
            if case .databaseIsEmpty = error.underlyingError as? SearchBreadDatabaseToolError {
                // Display an error in the UI.
            }
        } catch {
            print("Some other error: \(error)")
        }
    }

    struct RecipeDynamicProfile: LanguageModelSession.DynamicProfile {
        @SessionProperty(\.toolCallCount)
        var toolCallCount

        var body: some LanguageModelSession.DynamicProfile {
            Profile {
                BreadDatabaseTool()
            }
            .toolCallingMode(toolCallCount < 1 ? .required : .allowed)
            .onToolCall {
                toolCallCount += 1
            }
        }
    }

    struct PreservingProfile: LanguageModelSession.DynamicProfile {
        var body: some LanguageModelSession.DynamicProfile {
            // Configure a profile to preserve the transcript when an error occurs.
            Profile {
                // Your dynamic instructions and tools.
            }
            .temperature(0.9)
            .transcriptErrorHandlingPolicy(.preserveTranscript)
        }
    }

    static func history(_ session: LanguageModelSession) {
        for entry in session.transcript {
            switch entry {
            case .instructions(let instructions):
                _ = instructions // Display the instructions the model uses.
            case .prompt(let prompt):
                _ = prompt // Display the prompt made to the model.
            case .toolCalls(let calls):
                _ = calls // Display the call details for a tool, like the tool name and arguments.
            case .toolOutput(let output):
                _ = output // Display the output that a tool provides back to the model.
            case .response(let response):
                _ = response // Display the response from the model.
            case .reasoning(let reasoning):
                _ = reasoning // Display the reasoning from the model.
            @unknown default:
                break // Handle an unknown entry.
            }
        }
    }
}

extension SessionPropertyValues {
    @SessionPropertyEntry
    var toolCallCount: Int = 0
}

// https://developer.apple.com/videos/play/wwdc2025/286/
enum MeetTheFramework {
    @Generable
    struct SearchSuggestions {
        @Guide(description: "A list of suggested search terms", .count(4))
        var searchTerms: [String]
    }

    @Generable struct Person {
        var name: String
    }

    @Generable struct Itinerary {
        var destination: String
        var days: Int
        var budget: Float
        var rating: Double
        var requiresVisa: Bool
        var activities: [String]
        var emergencyContact: Person
        var relatedItineraries: [Itinerary]
    }

    @Generable
    struct Top3ActionEmotionResult {
        @Guide(.maximumCount(3))
        let actions: [String]
        @Guide(.maximumCount(3))
        let emotions: [String]
    }

    static func samples() async throws {
        let session = LanguageModelSession()
        let prompt = """
            Generate a list of suggested search terms for an app about visiting famous landmarks.
            """
        let response = try await session.respond(
            to: prompt,
            generating: SearchSuggestions.self
        )
        print(response.content)

        let stream = session.streamResponse(
            to: "Craft a 3-day itinerary to Mt. Fuji.",
            generating: Itinerary.self
        )
        for try await partial in stream {
            print(partial)
        }

        let weatherSession = LanguageModelSession(
            tools: [ToolCalling.BreadDatabaseTool()],
            instructions: "Help the user with weather forecasts."
        )
        let weather = try await weatherSession.respond(
            to: "What is the temperature in Cupertino?"
        )
        print(weather.content)

        let haikus = LanguageModelSession()
        let firstHaiku = try await haikus.respond(to: "Write a haiku about fishing")
        print(firstHaiku.content)
        let secondHaiku = try await haikus.respond(to: "Do another one about golf")
        print(secondHaiku.content)
        print(haikus.transcript)

        let tagging = LanguageModelSession(
            model: SystemLanguageModel(useCase: .contentTagging),
            instructions: "Tag the 3 most important actions and emotions in the given input text."
        )
        let tags = try await tagging.respond(to: "The cat jumped happily.", generating: Top3ActionEmotionResult.self)
        _ = tags

        let model = SystemLanguageModel.default
        switch model.availability {
        case .available:
            print("Model is available")
        case .unavailable(let reason):
            print("Model is unavailable")
            print("Reason: \(reason)")
        }
    }
}

// https://developer.apple.com/videos/play/wwdc2025/301/
enum DeepDive {
    @Generable
    struct NPC {
      @Guide(description: "A full name")
      let name: String
      @Guide(.range(1...10))
      let level: Int
      @Guide(.count(3))
      let attributes: [Attribute]
      let encounter: Encounter

      @Generable
      enum Attribute {
        case sassy
        case tired
        case hungry
      }
      @Generable
      enum Encounter {
        case orderCoffee(String)
        case wantToTalkToManager(complaint: String)
      }
    }

    @Generable
    struct Riddle {
      let question: String
      let answers: [Answer]

      @Generable
      struct Answer {
        let text: String
        let isCorrect: Bool
      }
    }

    static func respond(userInput: String) async throws -> String {
      let session = LanguageModelSession(instructions: """
        You are a friendly barista in a world full of pixels.
        Respond to the player’s question.
        """
      )
      let response = try await session.respond(to: userInput)
      return response.content
    }

    static func contextWindow(prompt: String) async throws {
        var session = LanguageModelSession()
        do {
          let answer = try await session.respond(to: prompt)
          print(answer.content)
        } catch LanguageModelSession.GenerationError.exceededContextWindowSize {
          // New session, with some history from the previous session.
          session = newSession(previousSession: session)
        }
    }

    // The session's `transcript.entries`, a spelling of the 2025 betas, compiles (deprecated).
    @available(*, deprecated)
    private static func newSession(previousSession: LanguageModelSession) -> LanguageModelSession {
      let allEntries = previousSession.transcript.entries
      var condensedEntries = [Transcript.Entry]()
      if let firstEntry = allEntries.first {
        condensedEntries.append(firstEntry)
        if allEntries.count > 1, let lastEntry = allEntries.last {
          condensedEntries.append(lastEntry)
        }
      }
      let condensedTranscript = Transcript(entries: condensedEntries)
      // Note: transcript includes instructions.
      return LanguageModelSession(transcript: condensedTranscript)
    }

    static func sampling(session: LanguageModelSession, prompt: String) async throws {
        // Deterministic output
        let deterministic = try await session.respond(
          to: prompt,
          options: GenerationOptions(sampling: .greedy)
        )

        // Low-variance output
        let low = try await session.respond(
          to: prompt,
          options: GenerationOptions(temperature: 0.5)
        )

        // High-variance output
        let high = try await session.respond(
          to: prompt,
          options: GenerationOptions(temperature: 2.0)
        )
        _ = (deterministic, low, high)
    }

    static func languages(userInput: String) async throws {
        let session = LanguageModelSession()
        do {
          let answer = try await session.respond(to: userInput)
          print(answer.content)
        } catch LanguageModelSession.GenerationError.unsupportedLanguageOrLocale {
          // Unsupported language in prompt.
        }

        let supportedLanguages = SystemLanguageModel.default.supportedLanguages
        guard supportedLanguages.contains(Locale.current.language) else {
          // Show message
          return
        }
    }

    static func makeNPC() async throws -> NPC {
      let session = LanguageModelSession(instructions: "You write characters for a coffee shop game.")
      let response = try await session.respond(generating: NPC.self) {
        "Generate a character that orders a coffee."
      }
      return response.content
    }

    struct LevelObjectCreator {
      var name: String
      var properties: [DynamicGenerationSchema.Property] = []

      mutating func addStringProperty(name: String) {
        let property = DynamicGenerationSchema.Property(
          name: name,
          schema: DynamicGenerationSchema(type: String.self)
        )
        properties.append(property)
      }

      mutating func addBoolProperty(name: String) {
        let property = DynamicGenerationSchema.Property(
          name: name,
          schema: DynamicGenerationSchema(type: Bool.self)
        )
        properties.append(property)
      }

      mutating func addArrayProperty(name: String, customType: String) {
        let property = DynamicGenerationSchema.Property(
          name: name,
          schema: DynamicGenerationSchema(
            arrayOf: DynamicGenerationSchema(referenceTo: customType)
          )
        )
        properties.append(property)
      }

      var root: DynamicGenerationSchema {
        DynamicGenerationSchema(
          name: name,
          properties: properties
        )
      }
    }

    static func riddleSchema() throws -> GenerationSchema {
        var riddleBuilder = LevelObjectCreator(name: "Riddle")
        riddleBuilder.addStringProperty(name: "question")
        riddleBuilder.addArrayProperty(name: "answers", customType: "Answer")

        var answerBuilder = LevelObjectCreator(name: "Answer")
        answerBuilder.addStringProperty(name: "text")
        answerBuilder.addBoolProperty(name: "isCorrect")

        let riddleDynamicSchema = riddleBuilder.root
        let answerDynamicSchema = answerBuilder.root

        let schema = try GenerationSchema(
          root: riddleDynamicSchema,
          dependencies: [answerDynamicSchema]
        )
        return schema
    }
}
