package ingest

// MaxDocumentBytes caps one submitted document before any parsing.
const MaxDocumentBytes = 16 << 20
