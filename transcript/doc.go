// Package transcript owns a run's transcript: the run reassembled, from its audit log and the
// bodies that log hashes, into what happened on one time axis — every model exchange as
// messages (prompts, assistant text, reasoning summaries, tool calls and their results; OpenAI
// chat completions, the Responses API and Anthropic messages, streamed or not), each request
// shown as what it added to the conversation, interleaved with the compute calls, submissions,
// validation scores, promotions, the clock and the end. It checks every kept body against the
// hash its audit entry carries (intact, withheld, missing or altered), writes the versioned
// transcript.json (docs/TRANSCRIPT.md, transcript/transcript.schema.json) and renders the
// self-contained transcript.html from it, the page `sealrun view` serves live too. It builds for
// every OS: a reader checks a published transcript on a laptop.
package transcript
