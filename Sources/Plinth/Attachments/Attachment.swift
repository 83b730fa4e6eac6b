import Foundation
#if canImport(ImageIO)
import ImageIO
#else
/// The orientation of an image: the values of the EXIF orientation tag, as Apple's ImageIO
/// defines them (Linux has no ImageIO).
public enum CGImagePropertyOrientation: UInt32, Sendable {
    case up = 1, upMirrored, down, downMirrored, leftMirrored, right, rightMirrored, left
}
#endif

/// A type that you use as the content of an attachment.
public protocol AttachmentContent {}

/// An image, as the content of an attachment.
public struct ImageAttachmentContent: AttachmentContent, Sendable, Equatable {
    let image: Transcript.ImageAttachment
}

/// Content, such as an image, that you attach to a prompt or instructions.
///
/// Labels help the model identify specific attachments when making tool calls:
///
/// ```swift
/// Prompt {
///     "Compare these two images:"
///     Attachment(imageURL: first).label("image-0")
///     Attachment(imageURL: second).label("image-1")
/// }
/// ```
///
/// Plinth's models read text: a request whose transcript holds an image throws
/// ``LanguageModelError/unsupportedTranscriptContent(_:)`` from a local model, and a model of
/// your own reads the attachment's URL from the transcript.
public struct Attachment<Content> where Content: AttachmentContent {
    let content: Content
    let attachmentLabel: String?

    /// Assigns a label to an attachment.
    ///
    /// - Parameter label: A string that identifies this attachment.
    public func label(_ label: String) -> Attachment<Content> {
        Attachment(content: content, attachmentLabel: label)
    }
}

extension Attachment where Content == ImageAttachmentContent {
    /// Creates an attachment from a file URL pointing to an image.
    ///
    /// - Parameters:
    ///   - imageURL: A URL to the image file to attach.
    ///   - orientation: The orientation to apply to the image. Pass `nil` to use the image's
    ///     natural orientation.
    public init(imageURL: URL, orientation: CGImagePropertyOrientation? = nil) {
        self.init(content: ImageAttachmentContent(image: Transcript.ImageAttachment(imageURL: imageURL, orientation: orientation)),
                  attachmentLabel: nil)
    }

    var segment: Transcript.Segment {
        .attachment(Transcript.AttachmentSegment(content: .image(content.image), label: attachmentLabel))
    }
}

extension Attachment: PromptRepresentable, InstructionsRepresentable where Content == ImageAttachmentContent {
    /// A prompt that holds the attachment.
    public var promptRepresentation: Prompt { Prompt(segments: [segment]) }
    /// Instructions that hold the attachment.
    public var instructionsRepresentation: Instructions { Instructions(segments: [segment]) }
}

extension Transcript {
    /// A segment holding an attachment, such as an image.
    public struct AttachmentSegment: Sendable, Identifiable, Equatable {
        /// The stable identity of the entity associated with this instance.
        public var id: String
        /// What's attached.
        public var content: Transcript.Attachment
        /// The label the model refers to the attachment by.
        public var label: String?

        /// Creates an attachment segment.
        public init(id: String = UUID().uuidString, content: Transcript.Attachment, label: String? = nil) {
            self.id = id
            self.content = content
            self.label = label
        }
    }

    /// Something attached to a prompt or instructions.
    public enum Attachment: Sendable, Equatable {
        /// An image.
        case image(Transcript.ImageAttachment)
    }

    /// An image in a transcript.
    public struct ImageAttachment: Sendable, Equatable {
        /// The image file's URL.
        public let url: URL?
        let imageOrientation: CGImagePropertyOrientation?

        /// The orientation to apply to the image: `.up` unless one was given.
        public var orientation: CGImagePropertyOrientation { imageOrientation ?? .up }

        /// Creates an image attachment from a file URL pointing to an image.
        public init(imageURL: URL, orientation: CGImagePropertyOrientation? = nil) {
            url = imageURL
            imageOrientation = orientation
        }
    }
}

extension Transcript.AttachmentSegment: CustomStringConvertible {
    /// The attachment as text: its kind, label and URL.
    public var description: String {
        switch content {
        case .image(let image):
            "[image" + (label.map { " \($0)" } ?? "") + (image.url.map { ": \($0.absoluteString)" } ?? "") + "]"
        }
    }
}

/// A reference to an image in a session's transcript, by its attachment label.
///
/// Use `ImageReference` as a tool argument to let the model point at an image of the
/// transcript, then resolve it in the tool:
///
/// ```swift
/// struct MyTool: Tool {
///     @SessionProperty(\.history) var history
///
///     @Generable
///     struct Arguments {
///         var image: ImageReference
///     }
///
///     func call(arguments: Arguments) async throws -> String {
///         guard let image = arguments.image.resolve(in: history) else { return "No such image." }
///         return "Image at \(image.url?.path ?? "?")"
///     }
/// }
/// ```
public struct ImageReference: Sendable, Equatable {
    /// The label of the attachment the reference points at.
    public let attachmentLabel: String

    /// Returns the image attachment with this reference's label, or `nil` if no attachment in
    /// the transcript has it.
    public func resolve(in transcript: Transcript) -> Transcript.ImageAttachment? {
        resolve(in: transcript.storage as [Transcript.Entry])
    }

    /// Returns the image attachment with this reference's label in `entries` (a session's
    /// history, say), or `nil` if none has it.
    @_disfavoredOverload
    public func resolve(in entries: some Sequence<Transcript.Entry>) -> Transcript.ImageAttachment? {
        var found: Transcript.ImageAttachment?
        for entry in entries {
            for case .attachment(let segment) in entry.segments where segment.label == attachmentLabel {
                if case .image(let image) = segment.content { found = image }
            }
        }
        return found
    }

    /// Returns the image attachment with this reference's label (the spelling of a later SDK's
    /// documentation for ``resolve(in:)-(Transcript)``).
    public func resolved(in entries: some Sequence<Transcript.Entry>) -> Transcript.ImageAttachment? {
        resolve(in: entries)
    }

    /// A partially generated image reference.
    public struct PartiallyGenerated: Identifiable, ConvertibleFromGeneratedContent, Equatable {
        public var id: GenerationID
        /// The label, as far as it's generated.
        public var attachmentLabel: String.PartiallyGenerated?

        public init(_ content: GeneratedContent) throws {
            id = content.id ?? GenerationID()
            attachmentLabel = try content.value(String?.self, forProperty: "attachmentLabel")
        }
    }
}

extension ImageReference: Generable {
    /// An object with the attachment's label.
    public static var generationSchema: GenerationSchema {
        // The schema of a fixed shape can't fail to build.
        try! GenerationSchema(root: DynamicGenerationSchema(
            name: "ImageReference", description: "A reference to an image attachment of the conversation",
            properties: [.init(name: "attachmentLabel", description: "The label of the image attachment",
                               schema: DynamicGenerationSchema(type: String.self))]),
            dependencies: [])
    }

    /// The reference as generated content.
    public var generatedContent: GeneratedContent {
        GeneratedContent(properties: ["attachmentLabel": attachmentLabel])
    }

    /// Reads a reference from generated content.
    public init(_ content: GeneratedContent) throws {
        attachmentLabel = try content.value(String.self, forProperty: "attachmentLabel")
    }
}
