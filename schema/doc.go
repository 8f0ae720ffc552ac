// Package schema holds lrstream's domain types: LeRobot v3 dataset metadata,
// the language row model shared by the language_persistent and
// language_events columns, the style registry, the tools catalog, and the
// chat-message model that rendering produces.
//
// Every other package speaks in these types; schema itself depends on
// nothing else in lrstream.
package schema
