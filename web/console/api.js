// The console's one way to the roombox API: fetch() with the API token in
// an Authorization header, and event streams read from a fetch() body
// (EventSource cannot send that header).  The token lives in this tab's
// sessionStorage only: closing the tab forgets it.

const KEY = "roombox.token";

export const token = {
	get: () => sessionStorage.getItem(KEY),
	set: (t) => sessionStorage.setItem(KEY, t),
	clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
	constructor(status, message) {
		super(message);
		this.status = status;
	}
}

// Called when the API says the token is no longer good (401).
let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

export const roomPath = (id) => "/api/rooms/" + encodeURIComponent(id);

// A path in the room as the files API wants it: relative to /workspace
// (the API's default), each segment escaped.
export function filesPath(id, path) {
	const rel = path === "/workspace" ? "" : path.startsWith("/workspace/") ? path.slice(11) : path;
	return roomPath(id) + "/sandbox/files/" + rel.split("/").map(encodeURIComponent).join("/");
}

export async function request(method, path, { json, body, headers = {}, signal, auth = true } = {}) {
	const h = { ...headers };
	if (auth) h.Authorization = "Bearer " + (token.get() || "");
	if (json !== undefined) {
		h["Content-Type"] = "application/json";
		body = JSON.stringify(json);
	}
	const r = await fetch(path, { method, headers: h, body, signal, cache: "no-store" });
	if (!r.ok) {
		let message = r.status + " " + r.statusText;
		try {
			const j = await r.json();
			if (j && j.error) message = j.error;
		} catch { /* not JSON: keep the status line */ }
		if (r.status === 401 && auth) onUnauthorized();
		throw new ApiError(r.status, message);
	}
	return r;
}

export async function api(method, path, opts) {
	const r = await request(method, path, opts);
	const type = r.headers.get("Content-Type") || "";
	return type.includes("json") ? r.json() : null;
}

// Reads a text/event-stream body and calls onEvent({id, data}) for each
// event (data parsed as JSON); comments (": keep-alive") are skipped.
// Returns when the stream ends; throws when it breaks.
export async function readEvents(response, onEvent) {
	const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
	let buf = "";
	for (;;) {
		const { value, done } = await reader.read();
		if (done) return;
		buf += value.replace(/\r/g, "");
		let end;
		while ((end = buf.indexOf("\n\n")) >= 0) {
			const block = buf.slice(0, end);
			buf = buf.slice(end + 2);
			let id = null;
			const data = [];
			for (const line of block.split("\n")) {
				if (line.startsWith(":")) continue;
				const colon = line.indexOf(":");
				const field = colon < 0 ? line : line.slice(0, colon);
				const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
				if (field === "id") id = val;
				else if (field === "data") data.push(val);
			}
			if (!data.length) continue;
			let parsed;
			try { parsed = JSON.parse(data.join("\n")); } catch { continue; }
			onEvent({ id, data: parsed });
		}
	}
}

// POST …/sandbox/exec as an event stream: onEvent gets start, stdout,
// stderr, then complete or error.
export async function execStream(roomId, body, onEvent, signal) {
	const r = await request("POST", roomPath(roomId) + "/sandbox/exec", {
		json: body, headers: { Accept: "text/event-stream" }, signal,
	});
	await readEvents(r, (e) => onEvent(e.data));
}

// Saves a room's file to the user's disk: fetched with the token, handed to
// the browser as a blob.
export async function download(roomId, path) {
	const r = await request("GET", filesPath(roomId, path));
	const blob = await r.blob();
	const url = URL.createObjectURL(blob);
	const a = document.createElement("a");
	a.href = url;
	a.download = path.split("/").pop();
	document.body.append(a);
	a.click();
	a.remove();
	setTimeout(() => URL.revokeObjectURL(url), 60000);
}

export function formatBytes(n) {
	if (n == null) return "";
	const units = ["B", "K", "M", "G", "T"];
	let i = 0;
	while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
	return (i ? n.toFixed(n < 10 ? 1 : 0) : n) + units[i];
}

export function ago(iso) {
	if (!iso) return "";
	const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
	if (s < 60) return Math.floor(s) + "s ago";
	if (s < 3600) return Math.floor(s / 60) + "m ago";
	if (s < 86400) return Math.floor(s / 3600) + "h ago";
	return Math.floor(s / 86400) + "d ago";
}

// A small element builder: h("div.cls#id", {attrs}, ...children).
export function h(tag, attrs, ...children) {
	const m = tag.match(/^([a-z0-9]+)((?:[.#][\w-]+)*)$/i);
	const el = document.createElement(m[1]);
	for (const part of m[2].match(/[.#][\w-]+/g) || []) {
		if (part[0] === ".") el.classList.add(part.slice(1));
		else el.id = part.slice(1);
	}
	if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
		children.unshift(attrs);
		attrs = null;
	}
	for (const [k, v] of Object.entries(attrs || {})) {
		if (v == null || v === false) continue;
		if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
		else if (k === "dataset") Object.assign(el.dataset, v);
		else el.setAttribute(k, v === true ? "" : v);
	}
	for (const c of children.flat()) {
		if (c == null || c === false) continue;
		el.append(c instanceof Node ? c : String(c));
	}
	return el;
}
