// Placeholder until this target's tests land (SwiftPM needs a source file).
