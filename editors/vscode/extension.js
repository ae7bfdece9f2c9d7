// Starts `policyc lsp` for .policy files. Everything else (diagnostics,
// hover, definition, references, rename, completion, outline, formatting)
// comes from the server; highlighting comes from syntaxes/.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration("converge").get("policyc.path", "policyc");
  const server = { command, args: ["lsp"] };
  client = new LanguageClient(
    "converge-policy",
    "Converge Policy (policyc lsp)",
    { run: server, debug: server },
    { documentSelector: [{ scheme: "file", language: "policy" }] },
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
