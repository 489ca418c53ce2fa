/** Who a request acts for, once its API key was checked: every service call and resolver scopes by it. */
export interface Auth {
  projectId: string;
  /** The API key's id; for a dashboard session, the user's id (usr_…). The actor in audit logs. */
  apiKeyId: string;
}
