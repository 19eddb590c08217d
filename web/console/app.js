// The roombox console: sign-in with the API token, the rooms sidebar, and
// one room's view (file explorer beside the tabs Terminal, Commands,
// Processes, Ports, Messages).  Plain ES modules; xterm.js is the only code
// from outside (vendor/).

import { api, request, token, setUnauthorizedHandler, roomPath, formatBytes, ago, h, ApiError } from "./api.js";
import { TerminalPane } from "./terminal.js";
import { FileTree } from "./files.js";
import { CommandsPanel, ProcessesPanel, PortsPanel, MessagesPanel } from "./panels.js";

const $ = (sel) => document.querySelector(sel);
const TABS = [
	["terminal", "Terminal"], ["commands", "Commands"], ["processes", "Processes"],
	["ports", "Ports"], ["messages", "Messages"],
];

const ui = {
	toast(text, kind = "info") {
		const t = h("div.toast." + kind, { role: kind === "error" ? "alert" : "status" }, text);
		$("#toasts").append(t);
		setTimeout(() => t.remove(), kind === "error" ? 8000 : 4000);
	},
	setStatus(text) { $("#status-text").textContent = text || ""; },
	roomsChanged() { loadRooms(); },
};

// ---------------------------------------------------------------- sign-in

function showSignIn(message) {
	closeRoom();
	clearInterval(roomsTimer);
	$("#app").hidden = true;
	$("#signin").hidden = false;
	$("#signin-error").textContent = message || "";
	$("#token").focus();
}

async function signIn(t) {
	// Any authenticated read tells a good token from a bad one.
	const r = await fetch("/api/rooms", { headers: { Authorization: "Bearer " + t }, cache: "no-store" });
	if (r.status === 401 || r.status === 403) throw new Error("That token was refused.");
	if (!r.ok) throw new Error("The service answered " + r.status + ".");
	token.set(t);
}

$("#signin-form").addEventListener("submit", async (e) => {
	e.preventDefault();
	const t = $("#token").value.trim();
	if (!t) return;
	$("#signin-button").disabled = true;
	try {
		await signIn(t);
		$("#token").value = "";
		enterApp();
	} catch (err) {
		$("#signin-error").textContent = err.message;
	} finally {
		$("#signin-button").disabled = false;
	}
});

$("#signout").addEventListener("click", () => { token.clear(); showSignIn(""); });
setUnauthorizedHandler(() => { token.clear(); showSignIn("The token is no longer accepted: sign in again."); });

// ---------------------------------------------------------------- rooms

let rooms = [];
let roomsTimer = null;
let current = null;         // {id, panes: {...}, tab}

async function enterApp() {
	$("#signin").hidden = true;
	$("#app").hidden = false;
	fetch("/api/health").then((r) => r.json()).then((j) => {
		$("#version").textContent = "roombox " + (j.version || "");
	}).catch(() => {});
	await loadRooms();
	clearInterval(roomsTimer);
	roomsTimer = setInterval(loadRooms, 5000);
	const want = decodeURIComponent((location.hash.match(/^#room=(.+)$/) || [])[1] || "");
	if (want) openRoom(want);
}

async function loadRooms() {
	try {
		const r = await api("GET", "/api/rooms");
		rooms = r.rooms;
	} catch (e) {
		if (!(e instanceof ApiError && e.status === 401)) ui.setStatus("rooms: " + e.message);
		return;
	}
	renderRooms();
	if (current) renderRoomHead();
}

function renderRooms() {
	const filter = $("#room-filter").value.trim().toLowerCase();
	const list = rooms
		.filter((r) => !filter || r.roomId.toLowerCase().includes(filter) ||
			Object.entries(r.labels || {}).some(([k, v]) => (k + "=" + v).toLowerCase().includes(filter)))
		.sort((a, b) => (b.lastActiveAt || "").localeCompare(a.lastActiveAt || ""));
	$("#rooms").replaceChildren(...list.map((r) => h("li.room-item", {
		dataset: { room: r.roomId, state: r.state },
		class: "room-item" + (current && current.id === r.roomId ? " active" : ""),
		title: r.roomId, onclick: () => openRoom(r.roomId) },
	h("span.dot." + r.state, ""),
	h("div.room-text",
		h("div.room-name", r.roomId),
		h("div.room-meta", r.state + " · " + ago(r.lastActiveAt) +
			(r.usage && r.usage.memoryBytes ? " · " + formatBytes(r.usage.memoryBytes) : ""))))));
	if (!list.length) $("#rooms").append(h("li.empty-note", rooms.length ? "No room matches." : "No rooms yet."));
	$("#room-count").textContent = String(rooms.length);
}

$("#room-filter").addEventListener("input", renderRooms);

$("#new-room-form").addEventListener("submit", async (e) => {
	e.preventDefault();
	const name = $("#new-room-name").value.trim();
	try {
		let id;
		if (name) {
			// A named room is made by the first thing done in it.
			await api("POST", roomPath(name) + "/sandbox/exec", { json: { cmd: "true" } });
			id = name;
		} else {
			id = (await api("POST", "/api/rooms")).roomId;
		}
		$("#new-room-name").value = "";
		await loadRooms();
		openRoom(id);
	} catch (err) {
		ui.toast(err.message, "error");
	}
});

// ---------------------------------------------------------------- one room

function closeRoom() {
	if (!current) return;
	for (const p of Object.values(current.panes)) p && p.dispose && p.dispose();
	current = null;
}

function renderRoomHead() {
	const r = rooms.find((x) => x.roomId === current.id);
	const st = r ? r.state : "new";
	$("#room-state").textContent = st;
	$("#room-state").className = "badge " + (st === "running" ? "ok" : "idle");
	$("#room-usage").textContent = r && r.usage
		? `mem ${formatBytes(r.usage.memoryBytes)} · disk ${formatBytes(r.usage.diskBytes)} · ${r.usage.processes} procs`
		: "";
	$("#room-labels").replaceChildren(...Object.entries((r && r.labels) || {}).map(([k, v]) => h("span.label", k + "=" + v)));
}

function openRoom(id) {
	if (current && current.id === id) return;
	closeRoom();
	location.hash = "room=" + encodeURIComponent(id);
	$("#empty").hidden = true;
	$("#room").hidden = false;
	$("#room").dataset.room = id;
	$("#room-title").textContent = id;
	current = { id, panes: {}, tab: null };
	renderRooms();
	renderRoomHead();

	const tabs = $("#tabs");
	const body = $("#tab-body");
	tabs.replaceChildren();
	body.replaceChildren();
	for (const [key, label] of TABS) {
		tabs.append(h("button.tab", { role: "tab", dataset: { tab: key }, id: "tab-" + key,
			onclick: () => showTab(key) }, label));
		body.append(h("div.tab-pane", { dataset: { pane: key }, id: "pane-" + key, hidden: true }));
	}
	const room = current;
	room.panes.files = new FileTree($("#explorer"), id, ui);
	room.panes.files.start();
	room.panes.commands = new CommandsPanel($("#pane-commands"), id, ui);
	room.panes.processes = new ProcessesPanel($("#pane-processes"), id, ui);
	room.panes.ports = new PortsPanel($("#pane-ports"), id, ui);
	room.panes.messages = new MessagesPanel($("#pane-messages"), id, ui);
	showTab("terminal");
	const termHost = h("div.term-host#terminal");
	$("#pane-terminal").append(termHost);
	room.panes.terminal = new TerminalPane(termHost, id, ui.setStatus);
	room.panes.terminal.start().then(() => {
		if (current === room && room.tab === "terminal") room.panes.terminal.focus();
	}).catch((e) => ui.toast("terminal: " + e.message, "error"));
}

function showTab(key) {
	const room = current;
	if (!room) return;
	const old = room.panes[room.tab];
	if (old && old.hide) old.hide();
	room.tab = key;
	for (const b of document.querySelectorAll("#tabs .tab")) b.classList.toggle("active", b.dataset.tab === key);
	for (const p of document.querySelectorAll("#tab-body .tab-pane")) p.hidden = p.dataset.pane !== key;
	const pane = room.panes[key];
	if (key === "terminal" && pane) { pane.refit(); pane.focus(); }
	else if (pane && pane.show) pane.show();
}

document.querySelector("#room-actions").addEventListener("click", async (e) => {
	const act = e.target.closest("button")?.dataset.act;
	if (!act || !current) return;
	const id = current.id;
	try {
		if (act === "stop") await api("POST", roomPath(id) + "/sandbox/stop");
		else if (act === "restart") await api("POST", roomPath(id) + "/sandbox/restart");
		else if (act === "delete") {
			if (!confirm("Delete room " + id + " and everything in it?")) return;
			await request("DELETE", roomPath(id));
			closeRoom();
			$("#room").hidden = true;
			$("#empty").hidden = false;
			history.replaceState(null, "", location.pathname);
		}
		ui.toast(act + ": " + id);
	} catch (err) {
		ui.toast(err.message, "error");
	}
	loadRooms();
});

document.addEventListener("keydown", (e) => {
	if (!current || !e.altKey || e.ctrlKey || e.metaKey) return;
	const n = parseInt(e.key, 10);
	if (n >= 1 && n <= TABS.length) { e.preventDefault(); showTab(TABS[n - 1][0]); }
});

// ---------------------------------------------------------------- start

if (token.get()) {
	signIn(token.get()).then(enterApp, () => { token.clear(); showSignIn(""); });
} else {
	showSignIn("");
}
