// A room's terminal pane: xterm.js attached to the room's pseudo-terminal
// over its WebSocket (…/sandbox/terminals/{tid}/ws, entered with a single-use
// ticket since a browser's WebSocket cannot carry the API token).  Where the
// service has no terminal route (404), the pane is a command line instead:
// each line runs through the exec event stream and its output is shown as
// it comes.

import { Terminal } from "./vendor/xterm.mjs";
import { FitAddon } from "./vendor/addon-fit.mjs";
import { api, execStream, roomPath, ApiError } from "./api.js";

const THEME = {
	background: "#181a1f", foreground: "#d7dae0", cursor: "#e5c07b",
	selectionBackground: "#3e4451", black: "#282c34", red: "#e06c75",
	green: "#98c379", yellow: "#e5c07b", blue: "#61afef", magenta: "#c678dd",
	cyan: "#56b6c2", white: "#d7dae0", brightBlack: "#5c6370",
};

export class TerminalPane {
	constructor(host, roomId, setStatus) {
		this.host = host;
		this.roomId = roomId;
		this.setStatus = setStatus;
		this.term = new Terminal({
			fontFamily: '"DejaVu Sans Mono", "Cascadia Mono", Menlo, Consolas, monospace',
			fontSize: 13, lineHeight: 1.15, cursorBlink: true, scrollback: 5000,
			theme: THEME, allowProposedApi: false,
		});
		this.fit = new FitAddon();
		this.term.loadAddon(this.fit);
		this.term.open(host);
		this.mode = "starting";
		this.closed = false;
		this.resize = new ResizeObserver(() => this.refit());
		this.resize.observe(host);
		this.refit();
	}

	refit() {
		if (this.host.offsetWidth && this.host.offsetHeight) this.fit.fit();
	}

	focus() { this.term.focus(); }

	async start() {
		const base = roomPath(this.roomId) + "/sandbox/terminals";
		let list;
		try {
			list = await api("GET", base);
		} catch (e) {
			if (e instanceof ApiError && (e.status === 404 || e.status === 405) && !/room/i.test(e.message)) {
				return this.startLineMode();
			}
			if (!(e instanceof ApiError && e.status === 404)) throw e;
			list = { terminals: [] };   // the room itself does not exist yet
		}
		let t = (list.terminals || []).find((x) => x.status === "running");
		if (!t) {
			const r = await api("POST", base, { json: { cols: this.term.cols, rows: this.term.rows } });
			t = r.terminal;
		}
		this.tid = t.id;
		this.mode = "pty";
		this.host.dataset.mode = "pty";
		this.term.onData((d) => this.send(new TextEncoder().encode(d)));
		this.term.onBinary((d) => this.send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
		this.term.onResize(({ cols, rows }) => this.sendControl({ type: "resize", cols, rows }));
		await this.connect();
	}

	async connect() {
		if (this.closed) return;
		const base = roomPath(this.roomId) + "/sandbox/terminals/" + encodeURIComponent(this.tid);
		const { ticket } = await api("POST", base + "/ticket");
		const scheme = location.protocol === "https:" ? "wss:" : "ws:";
		const ws = new WebSocket(`${scheme}//${location.host}${base}/ws?ticket=${encodeURIComponent(ticket)}`);
		ws.binaryType = "arraybuffer";
		this.ws = ws;
		ws.onopen = () => {
			this.setStatus("terminal " + this.tid + " attached");
			this.sendControl({ type: "resize", cols: this.term.cols, rows: this.term.rows });
		};
		ws.onmessage = (ev) => {
			if (typeof ev.data === "string") {
				let m;
				try { m = JSON.parse(ev.data); } catch { return; }
				if (m.type === "exit") {
					this.exited = true;
					this.term.write(`\r\n\x1b[2m[the shell exited with ${m.exitCode}: reopen the room for a new one]\x1b[0m\r\n`);
				}
			} else {
				this.term.write(new Uint8Array(ev.data));
			}
		};
		ws.onclose = () => {
			if (this.closed || this.exited) return;
			this.setStatus("terminal connection lost: reconnecting");
			setTimeout(() => this.connect().catch((e) => this.setStatus(e.message)), 1000);
		};
	}

	send(bytes) {
		if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(bytes);
	}

	sendControl(obj) {
		if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(obj));
	}

	// ---- the command line, where the service has no terminals

	startLineMode() {
		this.mode = "line";
		this.host.dataset.mode = "line";
		this.line = "";
		this.history = [];
		this.hpos = 0;
		this.running = null;
		const t = this.term;
		t.write("\x1b[2mThis server has no terminals: each line runs as a command in the room\r\n" +
			"(its working directory and exported variables carry over).\x1b[0m\r\n");
		this.prompt();
		t.onData((d) => this.lineInput(d));
		this.setStatus("terminal: command line (exec)");
	}

	prompt() {
		const name = this.roomId.length > 20 ? this.roomId.slice(0, 8) + "…" : this.roomId;
		this.term.write("\x1b[38;5;114m" + name + "\x1b[0m \x1b[38;5;75m$\x1b[0m ");
	}

	setLine(s) {
		this.term.write("\b \b".repeat([...this.line].length));
		this.line = s;
		this.term.write(s);
	}

	lineInput(d) {
		if (this.running) {
			if (d === "\x03") { this.running.abort(); }
			return;
		}
		if (d === "\x1b[A" || d === "\x1b[B") {
			if (!this.history.length) return;
			this.hpos = Math.max(0, Math.min(this.history.length, this.hpos + (d === "\x1b[A" ? -1 : 1)));
			this.setLine(this.history[this.hpos] || "");
			return;
		}
		if (d.startsWith("\x1b")) return;
		for (const ch of d) {
			if (ch === "\r") {
				this.term.write("\r\n");
				const cmd = this.line;
				this.line = "";
				if (cmd.trim()) {
					this.history.push(cmd);
					this.hpos = this.history.length;
					this.runLine(cmd);
					return;
				}
				this.prompt();
			} else if (ch === "\x7f" || ch === "\b") {
				if (this.line) {
					this.line = [...this.line].slice(0, -1).join("");
					this.term.write("\b \b");
				}
			} else if (ch === "\x03") {
				this.term.write("^C\r\n");
				this.line = "";
				this.prompt();
			} else if (ch === "\x0c") {
				this.term.clear();
			} else if (ch >= " ") {
				this.line += ch;
				this.term.write(ch);
			}
		}
	}

	async runLine(cmd) {
		const ctl = new AbortController();
		this.running = ctl;
		const crlf = (s) => s.replace(/\r?\n/g, "\r\n");
		try {
			await execStream(this.roomId, { cmd }, (e) => {
				if (e.type === "stdout") this.term.write(crlf(e.data));
				else if (e.type === "stderr") this.term.write("\x1b[31m" + crlf(e.data) + "\x1b[0m");
				else if (e.type === "complete" && e.result && e.result.exitCode !== 0) {
					this.term.write(`\x1b[2m[exit ${e.result.exitCode}${e.result.timedOut ? ", timed out" : ""}]\x1b[0m\r\n`);
				} else if (e.type === "error") {
					this.term.write("\x1b[31m" + crlf(e.error || "error") + "\x1b[0m\r\n");
				}
			}, ctl.signal);
		} catch (e) {
			this.term.write(ctl.signal.aborted ? "^C\r\n" : "\x1b[31m" + e.message + "\x1b[0m\r\n");
		}
		this.running = null;
		const buf = this.term.buffer.active;
		if (buf.cursorX !== 0) this.term.write("\r\n");
		this.prompt();
	}

	dispose() {
		this.closed = true;
		this.resize.disconnect();
		if (this.ws) this.ws.close();
		if (this.running) this.running.abort();
		this.term.dispose();
	}
}
