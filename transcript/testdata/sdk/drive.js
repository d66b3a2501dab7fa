// Drives the official OpenAI and Anthropic SDKs through sealrun's gateway, as a scaffold would:
// a two-turn tool-calling conversation on each API, streamed and not. Each line it prints is
// what the SDK made of an answer (JSON), for the test to compare.
//
//   node drive.js openai URL      (chat completions and the Responses API; URL is the gateway)
//   node drive.js anthropic URL   (messages)
//   node drive.js google URL      (the Gemini API: generateContent, streamGenerateContent)
'use strict';
const [which, url] = process.argv.slice(2);
const out = (what, v) => console.log(JSON.stringify({ what, v }));

async function openai() {
  const OpenAI = require('openai');
  const client = new OpenAI({ apiKey: 'agent-has-no-key', baseURL: url + '/v1', maxRetries: 0 });
  const tools = [{ type: 'function', function: { name: 'bash', description: 'run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } } } }];
  const messages = [
    { role: 'system', content: 'SDK-CHAT-SYSTEM: you are an ML engineer.' },
    { role: 'user', content: 'SDK-CHAT-USER: train the model.' },
  ];
  const first = await client.chat.completions.create({ model: 'gpt-x', messages, tools });
  const call = first.choices[0].message.tool_calls[0];
  out('chat tool call', { name: call.function.name, args: call.function.arguments });
  messages.push(first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'SDK-CHAT-TOOL-RESULT: loss 1.23' });
  const stream = await client.chat.completions.create({ model: 'gpt-x', messages, tools, stream: true, stream_options: { include_usage: true } });
  let text = '';
  for await (const chunk of stream) {
    if (chunk.choices[0] && chunk.choices[0].delta.content) text += chunk.choices[0].delta.content;
  }
  out('chat streamed text', text);

  const rtools = [{ type: 'function', name: 'shell', parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } } } } }];
  const input = [{ role: 'user', content: [{ type: 'input_text', text: 'SDK-RESP-USER: fix the test.' }] }];
  const r1 = await client.responses.create({ model: 'gpt-x', instructions: 'SDK-RESP-INSTRUCTIONS', input, tools: rtools, store: false });
  const fc = r1.output.find((o) => o.type === 'function_call');
  out('responses function call', { name: fc.name, args: fc.arguments });
  input.push(...r1.output, { type: 'function_call_output', call_id: fc.call_id, output: 'SDK-RESP-TOOL-OUTPUT: 2 passed' });
  const s2 = await client.responses.create({ model: 'gpt-x', instructions: 'SDK-RESP-INSTRUCTIONS', input, tools: rtools, store: false, stream: true });
  let rtext = '';
  for await (const ev of s2) {
    if (ev.type === 'response.output_text.delta') rtext += ev.delta;
  }
  out('responses streamed text', rtext);
}

async function anthropic() {
  const Anthropic = require('@anthropic-ai/sdk').default;
  const client = new Anthropic({ apiKey: 'agent-has-no-key', baseURL: url, maxRetries: 0 });
  const tools = [{ name: 'Bash', description: 'run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } }];
  const system = [{ type: 'text', text: 'SDK-ANT-SYSTEM: you are Claude.', cache_control: { type: 'ephemeral' } }];
  const messages = [{ role: 'user', content: 'SDK-ANT-USER: what is in /workspace?' }];
  const m1 = await client.messages.create({ model: 'claude-x', max_tokens: 1024, system, messages, tools });
  const use = m1.content.find((b) => b.type === 'tool_use');
  out('anthropic tool use', { name: use.name, input: use.input });
  messages.push({ role: 'assistant', content: m1.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'SDK-ANT-TOOL-RESULT: a.txt', is_error: false }] });
  const stream = client.messages.stream({ model: 'claude-x', max_tokens: 1024, system, messages, tools });
  const final = await stream.finalMessage();
  out('anthropic streamed', final.content.map((b) => (b.type === 'text' ? b.text : b.type)).join('|'));
}

async function google() {
  const { GoogleGenAI } = require('@google/genai');
  const ai = new GoogleGenAI({ apiKey: 'agent-has-no-key', httpOptions: { baseUrl: url } });
  const tools = [{ functionDeclarations: [{ name: 'run_shell_command', description: 'run a command', parameters: { type: 'OBJECT', properties: { command: { type: 'STRING' } } } }] }];
  const config = { systemInstruction: 'SDK-GEM-SYSTEM: you are Gemini.', tools };
  const contents = [{ role: 'user', parts: [{ text: 'SDK-GEM-USER: train the model.' }] }];
  const r1 = await ai.models.generateContent({ model: 'gemini-x', contents, config });
  const fc = r1.functionCalls[0];
  out('gemini function call', { name: fc.name, args: fc.args });
  contents.push(r1.candidates[0].content, { role: 'user', parts: [{ functionResponse: { name: fc.name, response: { output: 'SDK-GEM-TOOL-OUTPUT: loss 0.9' } } }] });
  const stream = await ai.models.generateContentStream({ model: 'gemini-x', contents, config });
  let text = '';
  for await (const ch of stream) text += ch.text || '';
  out('gemini streamed text', text);
}

({ openai, anthropic, google }[which] || (() => Promise.reject(new Error('drive.js openai|anthropic|google URL'))))().catch((e) => {
  console.error(String(e && e.stack || e));
  process.exit(1);
});
