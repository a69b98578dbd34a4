import express from 'express';
import { adapterAcceptance, adapterConformance } from './conformance.js';
import { expressHost } from './express-hosts.js';

const adapter = expressHost('Express 5', express);
adapterConformance(adapter);
adapterAcceptance(adapter);
