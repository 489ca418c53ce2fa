import { hostname } from 'node:os';

/**
 * Every session this process opens says whose it is (`application_name`, shown in
 * pg_stat_activity): the embedded cluster's stop tells this process's sessions, still open when a
 * stop ran out of time, from other processes' (which keep the cluster up).
 */
export const OWN_APPLICATION_NAME = `relay:${hostname().slice(0, 40)}:${process.pid}`;
