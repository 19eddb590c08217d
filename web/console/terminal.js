// A room's terminal pane: xterm.js attached to the room's pseudo-terminal
// over its WebSocket (…/sandbox/terminals/{tid}/ws, entered with a single-use
// ticket since a browser's WebSocket cannot carry the API token).  The pane
// attaches to a terminal the room already runs (its scrollback comes first)
// or starts one.

import { Terminal } from "./vendor/xterm.mjs";
import { FitAddon } from "./vendor/addon-fit.mjs";
import { api, roomPath, ApiError } from "./api.js";

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
		this.closed = false;
		this.pending = [];
		this.resize = new ResizeObserver(() => this.refit());
		this.resize.observe(host);
		this.refit();
	}

	refit() {
		if (this.host.offsetWidth && this.host.offsetHeight) this.fit.fit();
	}

	focus() { this.term.focus(); }

	async start() {
		this.term.onData((d) => {
			if (this.exited) {
				if (d === "\r") this.newTerminal().catch((e) => this.setStatus("terminal: " + e.message));
				return;
			}
			this.send(new TextEncoder().encode(d));
		});
		this.term.onBinary((d) => this.send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
		this.term.onResize(({ cols, rows }) => this.sendControl({ type: "resize", cols, rows }));
		const base = roomPath(this.roomId) + "/sandbox/terminals";
		let list;
		try {
			list = await api("GET", base);
		} catch (e) {
			if (!(e instanceof ApiError && e.status === 404)) throw e;
			list = { terminals: [] };   // the room itself does not exist yet
		}
		const t = (list.terminals || []).find((x) => x.status === "running");
		if (t) {
			this.tid = t.id;
			await this.connect();
		} else {
			await this.newTerminal();
		}
		this.host.dataset.mode = "pty";
	}

	async newTerminal() {
		const r = await api("POST", roomPath(this.roomId) + "/sandbox/terminals",
			{ json: { cols: this.term.cols, rows: this.term.rows } });
		this.tid = r.terminal.id;
		this.exited = false;
		this.term.reset();
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
			for (const b of this.pending.splice(0)) ws.send(b);
		};
		ws.onmessage = (ev) => {
			if (typeof ev.data === "string") {
				let m;
				try { m = JSON.parse(ev.data); } catch { return; }
				if (m.type === "exit") {
					this.exited = true;
					const why = m.exitCode == null ? "the room stopped the shell" : "the shell exited with " + m.exitCode;
					this.term.write(`\r\n\x1b[2m[${why}: press Enter for a new one]\x1b[0m\r\n`);
					this.setStatus("terminal " + this.tid + " ended");
				}
			} else {
				this.term.write(new Uint8Array(ev.data));
			}
		};
		ws.onclose = () => {
			if (this.closed || this.exited || ws !== this.ws) return;
			this.setStatus("terminal connection lost: reconnecting");
			setTimeout(() => this.connect().catch((e) => this.setStatus(e.message)), 1000);
		};
	}

	// Keystrokes typed while the socket is (re)connecting wait for it.
	send(bytes) {
		if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(bytes);
		else if (this.pending.length < 1024) this.pending.push(bytes);
	}

	sendControl(obj) {
		if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(obj));
	}

	dispose() {
		this.closed = true;
		this.resize.disconnect();
		if (this.ws) this.ws.close();
		this.term.dispose();
	}
}
